-- The SQL script of the sqlite3 recipe's ref input (data/recipes/record_traces.py) and of the
-- demo trace data/traces/sqlite3-orders.tkt: an in-memory database of 250,000 customers and
-- 250,000 orders naming 60,000 of them, an index, two aggregate queries over a join and a
-- scan, and an update. Deterministic: no random(), no time functions.
PRAGMA cache_size = -65536;
CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, city INTEGER);
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER, amount INTEGER, day INTEGER);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 250000)
INSERT INTO customers SELECT i, 'customer-' || i, (i * 7919) % 97 FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 250000)
INSERT INTO orders SELECT i, (i * 104729) % 60000 + 1, (i * 31337) % 1000, i % 365 FROM n;
CREATE INDEX orders_customer ON orders(customer);
SELECT city, count(*), sum(amount) FROM orders JOIN customers ON customers.id = orders.customer GROUP BY city ORDER BY 3 DESC LIMIT 5;
SELECT day, avg(amount) FROM orders GROUP BY day ORDER BY 2 DESC LIMIT 3;
UPDATE orders SET amount = amount + 1 WHERE day % 7 = 0;
SELECT count(*) FROM orders WHERE amount > 500;
