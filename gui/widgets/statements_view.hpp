// The Statements tab: the gateway's own word as it was imported. The statement files (gateway,
// format, file, period, final, lines, new lines, imported at and by); the lines a person must look
// at (mismatched, unmatched, duplicate), of the selected file or of all, with what matching found;
// per gateway, what its final statements cover and the gaps where absence cannot be evidence; and
// for the selected unmatched line the records it could be (MatchProposalsPanel), proposals that
// only a person's accept turns into a settle. It reads only; every write is the settle dialog's.
#pragma once

#include <QWidget>
#include <optional>

#include "models/request_tracker.hpp"
#include "models/statement_coverage.hpp"
#include "models/statement_line_model.hpp"
#include "models/statement_model.hpp"

class QCheckBox;
class QLabel;
class QTreeView;

namespace idem::admin {

class DatabaseSession;
class MatchProposalsPanel;
class RefreshStamp;

// What one read of the tab brings: the files and the coverage.
struct StatementsOverview {
  std::vector<StatementFile> files;
  std::vector<GatewayCoverage> coverage;
};

class StatementsView : public QWidget {
  Q_OBJECT

 public:
  StatementsView(DatabaseSession* session, int pageSize, QWidget* parent = nullptr);

  StatementModel* model() { return &files_; }
  StatementLineModel* lines() { return &lines_; }
  MatchProposalsPanel* proposals() const { return proposals_; }
  QTreeView* filesTable() const { return filesTable_; }
  QTreeView* linesTable() const { return linesTable_; }
  QCheckBox* onlySelectedFile() const { return onlySelected_; }
  RefreshStamp* stamp() const { return stamp_; }
  QString coverageText() const;
  bool isLoading() const { return overview_.isRunning() || lines_.isLoading(); }

  // Re-reads the files, the coverage, the loaded lines and the selected line's proposals.
  void refresh();
  // Makes the line with this id (idem.statement_lines.id) the current one; false if not loaded.
  bool selectLine(std::int64_t lineId);

 signals:
  void countChanged(int linesToLookAt);

 private:
  void buildFilesTable();
  void buildLinesTable();
  void layOut();
  void onOverview(const StatementsOverview& overview);
  void chooseLines();
  void onCurrentLineChanged();

  DatabaseSession* session_;
  StatementModel files_;
  StatementLineModel lines_;
  RequestTracker overview_{this};
  QLabel* summary_;
  QLabel* coverage_;
  RefreshStamp* stamp_;
  QCheckBox* onlySelected_;
  QTreeView* filesTable_ = nullptr;
  QTreeView* linesTable_ = nullptr;
  MatchProposalsPanel* proposals_;
};

}  // namespace idem::admin
