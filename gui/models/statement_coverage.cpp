#include "models/statement_coverage.hpp"

#include <QJsonArray>
#include <QJsonDocument>
#include <QStringList>
#include <pqxx/pqxx>

#include "idem/database_error.hpp"
#include "idem/sql_fragments.hpp"
#include "models/sql_row.hpp"
#include "models/statement_model.hpp"
#include "models/status_palette.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {
namespace {

// A multirange's ranges as a JSON array of [from, to] in epoch microseconds, in time order.
#define IDEM_SQL_RANGES_JSON(multirange)                                                 \
  "(SELECT json_agg(json_build_array(" IDEM_SQL_MICROS("lower(r)") ", " IDEM_SQL_MICROS( \
      "upper(r)") ") ORDER BY lower(r))::text FROM unnest(" multirange ") AS r)"

// clang-format off
constexpr const char* kCoverage =
    "WITH f AS (SELECT g.gateway, g.biz_types, g.settlement_delay, g.absence_is_evidence, "
    "count(s.id) AS files, count(s.id) FILTER (WHERE s.final) AS finals, "
    "range_agg(tstzrange(s.period_from, s.period_to)) FILTER (WHERE s.final) AS cover "
    "FROM idem.gateways AS g LEFT JOIN idem.statements AS s ON s.gateway = g.gateway "
    "GROUP BY g.gateway) "
    "SELECT gateway, array_to_json(biz_types)::text, settlement_delay::text, absence_is_evidence, "
    "files, finals, " IDEM_SQL_RANGES_JSON("cover") ", "
    IDEM_SQL_RANGES_JSON("tstzmultirange(tstzrange(lower(cover), upper(cover))) - cover")
    " FROM f ORDER BY gateway";
// clang-format on

std::vector<Period> periods(const pqxx::field& f) {
  std::vector<Period> out;
  if (f.is_null()) return out;
  for (const auto& pair : QJsonDocument::fromJson(QByteArray(f.c_str())).array()) {
    const QJsonArray bounds = pair.toArray();
    out.emplace_back(Timestamp(std::chrono::microseconds(bounds.at(0).toInteger())),
                     Timestamp(std::chrono::microseconds(bounds.at(1).toInteger())));
  }
  return out;
}

QString periodsText(const std::vector<Period>& list) {
  QStringList parts;
  for (const auto& [from, to] : list) parts << periodText(from, to);
  return parts.join(QStringLiteral(", "));
}

QString paragraph(const GatewayCoverage& g) {
  QStringList types;
  for (const std::string& t : g.bizTypes) types << fromUtf8(t);
  QString text = QStringLiteral("<b>%1</b> (%2; settlement delay %3): ")
                     .arg(fromUtf8(g.gateway).toHtmlEscaped(),
                          types.isEmpty() ? QStringLiteral("no business types declared")
                                          : types.join(QStringLiteral(", ")).toHtmlEscaped(),
                          fromUtf8(g.settlementDelay).toHtmlEscaped());
  if (g.covered.empty()) {
    text +=
        QStringLiteral("%1 file(s), no final statement: absence is evidence nowhere.").arg(g.files);
    return text;
  }
  text += QStringLiteral("%1 final of %2 file(s) cover %3.")
              .arg(g.finalFiles)
              .arg(g.files)
              .arg(periodsText(g.covered).toHtmlEscaped());
  if (!g.gaps.empty()) {
    text += QStringLiteral(
                " <span style=\"color:%1\"><b>Gap%2</b>: %3 \u2014 absence cannot be "
                "evidence there.</span>")
                .arg(toneCss(Tone::Alarm))
                .arg(g.gaps.size() == 1 ? QString() : QStringLiteral("s"))
                .arg(periodsText(g.gaps).toHtmlEscaped());
  } else {
    text += QStringLiteral(" No gap.");
  }
  text += g.absenceIsEvidence
              ? QStringLiteral(" Absence is evidence (FAILED) where covered.")
              : QStringLiteral(" Absence is not taken as evidence for this gateway.");
  return text;
}

}  // namespace

std::vector<GatewayCoverage> readCoverage(pqxx::connection& c) {
  return idem::translatingErrors("read the statement coverage", [&] {
    std::vector<GatewayCoverage> rows;
    pqxx::read_transaction tx(c);
    for (const pqxx::row& f : tx.exec(kCoverage)) {
      GatewayCoverage g;
      g.gateway = f[0].c_str();
      g.bizTypes = jsonArray(f[1]);
      g.settlementDelay = f[2].c_str();
      g.absenceIsEvidence = f[3].as<bool>();
      g.files = f[4].as<std::int64_t>();
      g.finalFiles = f[5].as<std::int64_t>();
      g.covered = periods(f[6]);
      g.gaps = periods(f[7]);
      rows.push_back(std::move(g));
    }
    tx.commit();
    return rows;
  });
}

QString coverageText(const std::vector<GatewayCoverage>& gateways) {
  if (gateways.empty()) return QStringLiteral("No gateway has sent a statement or a callback yet.");
  QStringList paragraphs;
  for (const GatewayCoverage& g : gateways) paragraphs << paragraph(g);
  return paragraphs.join(QStringLiteral("<br><br>"));
}

}  // namespace idem::admin
