#!/usr/bin/env bash
# Makes a small fleet: three clients, each a SQLite database with customers, orders and
# products tables of realistic types, in ./work/data. Rerunning starts afresh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work="$here/work"
rm -rf "$work"
mkdir -p "$work/data"
cp "$here/flotilla.toml" "$work/flotilla.toml"

make_client() {
  local name=$1 customers=$2 orders=$3
  sqlite3 "$work/data/$name.db" >/dev/null <<SQL
PRAGMA journal_mode=WAL;
CREATE TABLE customers (
  id INTEGER PRIMARY KEY,
  email VARCHAR(120) NOT NULL,
  full_name TEXT,
  country CHAR(2),
  signed_up DATE,
  vip BOOLEAN
);
CREATE TABLE products (
  sku VARCHAR(16) PRIMARY KEY,
  title TEXT NOT NULL,
  price DECIMAL(10,2) NOT NULL,
  weight_kg REAL,
  active BOOLEAN
);
CREATE TABLE orders (
  id INTEGER PRIMARY KEY,
  customer_id INTEGER NOT NULL,
  sku VARCHAR(16),
  quantity SMALLINT,
  total DECIMAL(12,2),
  status VARCHAR(20),
  updated_at TIMESTAMP
);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $customers)
INSERT INTO customers
SELECT i, 'user' || i || '@$name.example', 'Customer ' || i,
       CASE i % 3 WHEN 0 THEN 'US' WHEN 1 THEN 'DE' ELSE 'FR' END,
       date('2024-01-01', '+' || (i % 365) || ' days'), i % 7 = 0
FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40)
INSERT INTO products
SELECT printf('SKU-%04d', i), 'Product ' || i, round(4.99 + i * 1.25, 2), i * 0.15, i % 5 <> 0
FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $orders)
INSERT INTO orders
SELECT i, 1 + (i * 7) % $customers, printf('SKU-%04d', 1 + i % 40), 1 + i % 4,
       round((1 + i % 4) * (4.99 + (1 + i % 40) * 1.25), 2),
       CASE i % 4 WHEN 0 THEN 'new' WHEN 1 THEN 'paid' WHEN 2 THEN 'shipped' ELSE 'done' END,
       datetime('2025-01-01 08:00:00', '+' || i || ' minutes')
FROM n;
SQL
}

make_client acme 500 5000
make_client globex 300 2000
make_client initech 800 12000
echo "fleet ready in $work: $(ls "$work/data" | tr '\n' ' ')"
