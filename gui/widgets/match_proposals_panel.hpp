// Under the Statements tab's lines: the proposed matches for the selected unmatched line (records
// of the same amount and currency, stuck, created near the line's booking: MatchProposalModel).
// Proposals only. Accept... opens the settle dialog on the chosen record with the line filled in
// as evidence (accepted_proposal); the operator still gives the reason and confirms, and the
// decision goes through idem.settle's checked path like every settle. Reject hides the proposal
// for the session and writes nothing.
#pragma once

#include <QPointer>
#include <QWidget>
#include <optional>

#include "models/match_proposal_model.hpp"
#include "models/request_tracker.hpp"
#include "models/statement_line_model.hpp"
#include "models/worker_replies.hpp"

class QAction;
class QLabel;
class QTreeView;

namespace idem::admin {

class DatabaseSession;
class SettleDialog;

class MatchProposalsPanel : public QWidget {
  Q_OBJECT

 public:
  MatchProposalsPanel(DatabaseSession* session, QWidget* parent = nullptr);

  MatchProposalModel* model() { return &model_; }
  QTreeView* table() const { return table_; }
  QAction* acceptAction() const { return acceptAction_; }
  QAction* rejectAction() const { return rejectAction_; }
  SettleDialog* settleDialog() const;
  bool isLoading() const { return proposals_.isRunning(); }
  QString heading() const;

  // The line whose proposals to show; none: nothing selected.
  void showLine(const StatementLine* line);
  void refresh();
  // Opens the settle dialog for the selected proposal once its record is read: watch
  // settleDialogOpened.
  void acceptSelected();
  void rejectSelected();

 signals:
  void settleDialogOpened(idem::admin::SettleDialog* dialog);
  void recordSettled(const QString& key, const QString& message);

 private:
  void onProposals(const std::vector<MatchProposal>& rows);
  void updateActions();
  void openDialog(const RecordEvidence& evidence);

  DatabaseSession* session_;
  MatchProposalModel model_;
  RequestTracker proposals_{this};
  RequestTracker evidence_{this};
  std::optional<StatementLine> line_;
  QLabel* heading_;
  QTreeView* table_;
  QAction* acceptAction_;
  QAction* rejectAction_;
  QPointer<SettleDialog> dialog_;
};

}  // namespace idem::admin
