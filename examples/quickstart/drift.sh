#!/usr/bin/env bash
# Changes the sources the way fleets drift:
#   acme:    a new column (orders.coupon)                 -> add_columns
#   globex:  a wider type (products.price DECIMAL(10,2) -> DECIMAL(14,2)) -> alter_column_types
#   initech: an unsafe change (orders.status text -> INTEGER) -> drop_and_recreate
set -euo pipefail
work="$(cd "$(dirname "$0")" && pwd)/work"
sqlite3 "$work/data/acme.db" <<'SQL'
ALTER TABLE orders ADD COLUMN coupon TEXT;
-- The application stamps updated_at on the rows it changes, as an incremental table
-- (cursor_column = "updated_at") needs: a row whose cursor does not move is not read
-- again, and keeps NULL in the new column (seed 001: historical rows keep NULL).
UPDATE orders SET coupon = 'WELCOME10',
                  updated_at = datetime('2025-02-01 00:00:00', '+' || id || ' seconds')
 WHERE id % 10 = 0;
SQL
sqlite3 "$work/data/globex.db" <<'SQL'
CREATE TABLE products_new (sku VARCHAR(16) PRIMARY KEY, title TEXT NOT NULL,
  price DECIMAL(14,2) NOT NULL, weight_kg REAL, active BOOLEAN);
INSERT INTO products_new SELECT * FROM products;
DROP TABLE products;
ALTER TABLE products_new RENAME TO products;
SQL
sqlite3 "$work/data/initech.db" <<'SQL'
CREATE TABLE orders_new (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL, sku VARCHAR(16),
  quantity SMALLINT, total DECIMAL(12,2), status INTEGER, updated_at TIMESTAMP);
INSERT INTO orders_new SELECT id, customer_id, sku, quantity, total,
  CASE status WHEN 'new' THEN 0 WHEN 'paid' THEN 1 WHEN 'shipped' THEN 2 ELSE 3 END, updated_at
FROM orders;
DROP TABLE orders;
ALTER TABLE orders_new RENAME TO orders;
SQL
echo "drifted: acme.orders +coupon, globex.products price widened, initech.orders status -> INTEGER"
