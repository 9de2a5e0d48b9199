// SQL text that several statements share, written once. A macro because statements are string
// literals assembled at compile time: IDEM_SQL_MICROS("created_at") ", " ... stays one literal.
#pragma once

// A timestamptz as microseconds since the Unix epoch (bigint): timestamps travel this way, with no
// time zone or locale in the way, and idem::Timestamp holds exactly that.
#define IDEM_SQL_MICROS(column) "(extract(epoch FROM " column ") * 1000000)::bigint"
