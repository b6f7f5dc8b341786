#pragma once
/// How each source engine's declared column types map to portable types. Pure: the
/// adapters call these on the type names their catalogs report. docs/sources.md has the
/// tables in prose.

#include <string_view>

#include "schema/types.hpp"

namespace flotilla::sources {

/// A SQLite declared type ("DECIMAL(12,2)", "VARCHAR(20)", "unsigned big int", "").
/// Well-known names map to their type; anything else follows SQLite's own affinity rules
/// (https://www.sqlite.org/datatype3.html#determination_of_column_affinity): a name
/// containing INT is bigint (SQLite integers are 64-bit), CHAR/CLOB/TEXT is text, BLOB is
/// bytes, REAL/FLOA/DOUB is double. The rest (NUMERIC affinity under an unknown name, and
/// no declared type at all) is text, the one type every stored value converts to exactly.
/// Changing the mapping needs a new sqlite catalog_version() (kept catalogs).
[[nodiscard]] schema::portable_type map_sqlite_type(std::string_view declared);

/// A DuckDB type as duckdb_columns().data_type spells it ("DECIMAL(18,3)",
/// "TIMESTAMP WITH TIME ZONE", "INTEGER[]", "STRUCT(a INTEGER)").
[[nodiscard]] schema::portable_type map_duckdb_type(std::string_view data_type);

/// A PostgreSQL type as format_type() spells it ("numeric(12,2)", "character varying(20)",
/// "timestamp(3) with time zone", "integer[]").
[[nodiscard]] schema::portable_type map_postgres_type(std::string_view formatted);

}  // namespace flotilla::sources
