// Series keys as the exporter prints them, and reading a value from in-process families.
#pragma once

#include <prometheus/metric_family.h>

#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace idem::test {

inline std::string requestsKey(const std::string& biz, const std::string& source,
                               const std::string& outcome) {
  return "idempotency_requests_total{biz_type=\"" + biz + "\",source=\"" + source +
         "\",outcome=\"" + outcome + "\"}";
}
inline std::string fundFlowsKey(const std::string& biz, const std::string& kind) {
  return "idempotency_fund_flows_total{biz_type=\"" + biz + "\",kind=\"" + kind + "\"}";
}
inline std::string duplicatesKey(const std::string& biz, const std::string& kind) {
  return "idempotency_duplicate_fund_flows_total{biz_type=\"" + biz + "\",kind=\"" + kind + "\"}";
}
inline std::string recordedKey(const std::string& biz, const std::string& recordedBy) {
  return "idempotency_fund_flows_recorded_total{biz_type=\"" + biz + "\",recorded_by=\"" +
         recordedBy + "\"}";
}
inline std::string transitionsKey(const std::string& from, const std::string& to,
                                  const std::string& actor) {
  return "idempotency_transitions_total{from=\"" + from + "\",to=\"" + to + "\",actor_kind=\"" +
         actor + "\"}";
}
inline std::string tableKey(const std::string& name, const std::string& table) {
  return name + "{table=\"" + table + "\"}";
}
// The reconciliation's and the overcharges' series (docs/contract/metrics.md v2).
inline constexpr const char* kDebitWithoutSuccessKey =
    "idempotency_reconciliation_mismatches{kind=\"debit_without_success\"}";
inline constexpr const char* kSuccessWithoutDebitKey =
    "idempotency_reconciliation_mismatches{kind=\"success_without_debit\"}";
inline std::string overchargedObjectsKey(const std::string& biz) {
  return "idempotency_overcharged_business_objects{biz_type=\"" + biz + "\"}";
}
inline std::string overchargedAmountKey(const std::string& biz, const std::string& currency) {
  return "idempotency_overcharged_amount_minor{biz_type=\"" + biz + "\",currency=\"" + currency +
         "\"}";
}
inline std::string gapsResolvedKey(const std::string& table, const std::string& resolution) {
  return "idempotency_exporter_gaps_resolved_total{table=\"" + table + "\",resolution=\"" +
         resolution + "\"}";
}

// The value of a gauge or counter sample in families from Exporter::collect(), exactly as served.
inline std::optional<double> familyValue(
    const std::vector<prometheus::MetricFamily>& families, const std::string& name,
    const std::vector<std::pair<std::string, std::string>>& labels = {}) {
  for (const auto& f : families) {
    if (f.name != name) continue;
    for (const auto& m : f.metric) {
      if (m.label.size() != labels.size()) continue;
      bool match = true;
      for (std::size_t i = 0; i < labels.size(); ++i) {
        match = match && m.label[i].name == labels[i].first && m.label[i].value == labels[i].second;
      }
      if (!match) continue;
      return f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
  }
  return std::nullopt;
}

}  // namespace idem::test
