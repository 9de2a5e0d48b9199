// Reconciliation: fund flows against records, for the biz types that move money, over
// --reconcile-window, each older than --reconcile-grace, on its own slower --reconcile-interval.
// Publishes idempotency_reconciliation_mismatches{kind}: debit_without_success (money moved, a
// DEBIT or CAPTURE flow, but the business object has no SUCCESS record, nor the tombstone of a
// purged one: what a blind retry turns into a double charge) and success_without_debit (a SUCCESS
// record with no DEBIT or CAPTURE flow). Both count business objects: the rows of the schema's
// idem.money_moved_without_success and idem.success_without_money_moved
// (sql/migrations/012_money_questions.sql), the one definition the admin app and the runbooks read
// too.
//
// A collection costs what the interval added, not what the window holds. The collector keeps the
// open questions themselves: the charged objects of the window with no SUCCESS yet, and the
// SUCCESS records of the window with no charge yet, usually the handful in flight and the true
// mismatches. Two incremental readers (incremental_reader.hpp: every row once, in commit order
// of visibility) feed them: each new DEBIT or CAPTURE flow asks, in the statement that reads it,
// whether its object has a SUCCESS (record or tombstone), and each new SUCCESS transition whether
// its object has a charge; a flow closes its object's open SUCCESS, a SUCCESS closes its object's
// open charges. Whichever of the two events is read later was read on a snapshot that shows the
// earlier one, so the object ends open exactly when the definition says so, in any commit order.
// The counts are the open entries whose time falls in [now - window, now - grace), the database's
// now() of the collection; entries older than the window are dropped. At start the open
// questions come from the definitions themselves, over the window, in the snapshot in which both
// readers start, so a restart answers exactly as before it. SUCCESS
// is final and flows are append-only, so only retention can close a question otherwise: a purge
// younger than the window (idem.purge takes any age) may remove an open SUCCESS's record. The open
// SUCCESS entries are looked up again, kRecheckPerCollection of them a collection in turn, so such
// a purge shows within ceil(open / kRecheckPerCollection) reconciliations (at once while fewer are
// open) and a collection's cost stays bounded however many mismatches the window holds.
//
// On a schema older than migration 012 (an exporter that runs through an upgrade in place) the
// money questions do not exist yet: the reconciliation and overcharges collectors fail, each
// collection, with an error that names the migration (idempotency_exporter_collect_errors_total
// {stage}, the log), keep serving their last figures and their last-success timestamp, and answer
// again once 012 is applied.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <pqxx/row>
#include <pqxx/transaction_base>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "collectors/collector.hpp"
#include "exporter_options.hpp"
#include "incremental_reader.hpp"
#include "read_stats.hpp"

namespace idem::exporter {

struct ReconciliationSettings {
  std::chrono::milliseconds interval{60'000};
  std::chrono::milliseconds window{24 * 3600'000};
  std::chrono::milliseconds grace{5 * 60'000};
  std::vector<std::string> bizTypes;  // --reconcile-biz-types, whose default lives with the flag

  // --reconcile-interval, -window, -grace and -biz-types.
  static ReconciliationSettings from(const ExporterOptions& options);
};

// What the reconciliation and overcharges collectors share: the settings, the interval, the lock
// that guards what scrapes read, and the money questions' parameters in text form.
class MoneyQuestionCollector : public Collector {
 public:
  explicit MoneyQuestionCollector(ReconciliationSettings settings)
      : settings_(std::move(settings)) {}

  std::chrono::milliseconds interval() const override { return settings_.interval; }

 protected:
  // Throws, naming migration 012, when the schema lacks the money question `function` (its
  // signature, as to_regprocedure reads it).
  static void requireMoneyQuestion(pqxx::transaction_base& tx, const std::string& function);
  // '{"a","b"}', and --reconcile-window / -grace as interval text.
  std::string bizTypesParameter() const;
  std::string windowParameter() const;
  std::string graceParameter() const;

  // What the collectors that keep their answers from an incremental reader share.
  // "biz_type\x1fbiz_id": a business object.
  using ObjectKey = std::string;
  static ObjectKey objectKey(const pqxx::field& bizType, const pqxx::field& bizId);
  // {biz types}, {biz ids}: text[] parameters in text form.
  static std::pair<std::string, std::string> objectsParameters(std::span<const ObjectKey> objects);
  // The biz types as a text[] SQL constant: a reader's statements take only the reader's own
  // parameters, so the biz types are part of their text.
  std::string bizTypesConstant() const;
  // The window the start reads, a little longer than --reconcile-window, so that nothing the
  // first counts need is left out by the difference between the start's now() and a later
  // collection's.
  std::string startWindowParameter() const;
  // The start reads the window once, as long as a whole-window question took at every
  // reconciliation before: a longer bound than the collections' own.
  static std::chrono::milliseconds startTimeout();
  // A reader's limits with no window of its own: its collector's start reads the answers from
  // the definitions, in the snapshot the reader starts in.
  static ReaderLimits startLimits(ReaderLimits limits);

  const ReconciliationSettings settings_;
  mutable std::mutex mutex_;
};

class ReconciliationCollector : public MoneyQuestionCollector {
 public:
  ReconciliationCollector(ReconciliationSettings settings, ReaderLimits limits, ReadStats& stats);

  std::string_view name() const override { return "reconciliation"; }
  void update(pqxx::connection& connection) override;
  std::vector<IncrementalReader*> readers() override { return {&flows_, &transitions_}; }
  void collect(std::vector<prometheus::MetricFamily>& out) const override;

  // The tables' rows-read and gap figures, by these names (self-health's table label).
  static constexpr const char* kFlowsTable = "reconciliation_fund_flows";
  static constexpr const char* kTransitionsTable = "reconciliation_transitions";

 private:
  // The first update: the open questions of the window, from the definitions, and both readers
  // started, in one snapshot.
  void start(pqxx::connection& connection);
  void takeFlow(const pqxx::row& row);
  void takeTransition(const pqxx::row& row);
  // Drops what the window has left behind and counts what is in [now - window, now - grace).
  void publish(double now);
  // Looks up the next kRecheckPerCollection open SUCCESS entries, in turn, and drops those whose
  // record is gone (retention).
  void dropPurgedSuccesses(pqxx::connection& connection);
  static constexpr std::size_t kRecheckPerCollection = 256;

  IncrementalReader flows_;
  IncrementalReader transitions_;
  // Collection thread only. A charged object with no SUCCESS: the times of its charges.
  std::unordered_map<ObjectKey, std::vector<double>> openCharges_;
  // A SUCCESS record with no charge of its object: when it succeeded (the record's updated_at).
  // Ordered, so that the look-ups go round from recheckAfter_.
  std::map<ObjectKey, double> openSuccesses_;
  ObjectKey recheckAfter_;

  // Guarded by mutex_.
  double debitWithoutSuccess_ = 0;
  double successWithoutDebit_ = 0;
  double lastSuccess_ = 0;
};

}  // namespace idem::exporter
