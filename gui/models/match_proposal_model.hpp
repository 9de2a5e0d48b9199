// Proposed matches for an unmatched statement line: the records that could be the side effect the
// gateway reports but that no exact reference ties to it. A candidate is a record of one of the
// gateway's business types (any type when it declares none) that is stuck (idem.is_stuck: UNKNOWN,
// or PROCESSING past its lease), whose request asked the line's amount and currency, created within
// a window around the line's booking, for which the line's kind is the side effect
// (idem.side_effect_role) and whose side effect the ledger does not record yet. Nearest in time
// first.
//
// Proposals only: nothing here decides. A person accepts one through the settle dialog (the line
// as evidence, a reason of their own, idem.settle's checked path); rejecting one hides it for the
// session and writes nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <pqxx/connection>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "idem/domain.hpp"
#include "models/keyed_rows_model.hpp"
#include "models/settle_evidence.hpp"

namespace idem::admin {

struct StatementLine;

struct MatchProposal {
  std::int64_t lineId = 0;  // idem.statement_lines.id of the line it is proposed for
  std::string key;
  std::string bizType;
  std::string bizId;
  RecordStatus status = RecordStatus::Unknown;
  int version = 0;
  Timestamp createdAt{};
  std::optional<Timestamp> leaseExpiresAt;
  std::int64_t amountMinor = 0;
  std::string currency;
  std::chrono::seconds fromBooking{0};  // created_at minus the line's booked_at

  bool operator==(const MatchProposal&) const = default;
};

// How far from the line's booking a record's creation may be.
inline constexpr std::chrono::hours kProposalWindow{2};
inline constexpr int kProposalLimit = 50;

// The candidates for the line with this id; none unless the line is unmatched, booked at a known
// time and a side effect (it has a kind).
std::vector<MatchProposal> readProposals(pqxx::connection& c, std::int64_t lineId,
                                         std::chrono::seconds window = kProposalWindow,
                                         int limit = kProposalLimit);

// What accepting a proposal settles with: the line's gateway reference, and the JSON naming the
// line ({"source": "statement", "gateway", "statement_id", "line_id", "file", "source_line",
// "accepted_proposal": true}).
EvidenceInput proposalEvidence(const StatementLine& line);

class MatchProposalModel : public KeyedRowsModel<MatchProposal, std::string> {
  Q_OBJECT

 public:
  enum Columns { Key, BizType, BizId, Status, Amount, Created, FromBooking, ColumnCount };
  static constexpr auto kTitles = columnTitles<ColumnCount>(
      "Idempotency key", "Biz type", "Biz id", "Status", "Requested", "Created", "From booking");
  enum Roles {
    KeyRole = Qt::UserRole,  // QString: the idempotency key
    ExportRole,
  };

  using KeyedRowsModel::KeyedRowsModel;

  // The proposals for one line, without those rejected in this session.
  void setProposals(std::vector<MatchProposal> rows);
  // Hides the proposal in `row` until the application ends; writes nothing.
  void reject(int row);
  bool isRejected(std::int64_t lineId, const std::string& key) const;
  const MatchProposal* proposalAt(int row) const { return rowAt(row); }

 protected:
  std::span<const char* const> titles() const override { return kTitles; }
  QVariant cellData(const MatchProposal& p, int column, int role) const override;
  std::string keyOf(const MatchProposal& p) const override { return p.key; }
  bool sameContent(const MatchProposal& a, const MatchProposal& b) const override { return a == b; }

 private:
  QVariant display(const MatchProposal& p, int column) const;

  std::set<std::pair<std::int64_t, std::string>> rejected_;
};

// "12 min before the booking", "3 s after the booking".
QString fromBookingText(std::chrono::seconds offset);

}  // namespace idem::admin
