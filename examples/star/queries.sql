-- The shop's recent queries: the layout is optimized for queries like these.
SELECT st.st_region, sum(sa.sa_amount) FROM sales sa JOIN store st ON sa.sa_store = st.st_id
WHERE st.st_region = 'north' AND sa.sa_day >= DATE '2026-02-01' GROUP BY st.st_region;
SELECT pr.pr_category, count(*) FROM sales sa JOIN product pr ON sa.sa_product = pr.pr_id
WHERE pr.pr_category = 'books' GROUP BY pr.pr_category;
SELECT count(*) FROM sales sa JOIN product pr ON sa.sa_product = pr.pr_id
WHERE pr.pr_category IN ('toys', 'sports') AND sa.sa_qty >= 5;
SELECT st.st_city, sum(sa.sa_qty) FROM sales sa JOIN store st ON sa.sa_store = st.st_id
WHERE st.st_city = 'Bergen' GROUP BY st.st_city;
SELECT sum(sa.sa_amount) FROM sales sa WHERE sa.sa_day BETWEEN DATE '2026-03-01' AND DATE '2026-03-07';
SELECT count(*) FROM sales sa JOIN store st ON sa.sa_store = st.st_id JOIN product pr ON sa.sa_product = pr.pr_id
WHERE st.st_region = 'west' AND pr.pr_category = 'garden';
