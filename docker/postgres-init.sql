-- Runs once, when the PostgreSQL data volume is first initialised (files in
-- /docker-entrypoint-initdb.d are skipped on later starts).
--
-- The container's POSTGRES_DB (airflow) holds the Airflow metadata. This adds
-- a second database for the layout catalog (LAYOUT_CATALOG_URL), owned by the
-- same role so the pipeline can create its own tables there.
CREATE DATABASE layout OWNER airflow;
