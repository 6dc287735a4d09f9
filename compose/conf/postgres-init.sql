-- Databases of compose.yaml's Postgres, as e2e/stack/services/postgres.sh creates them.
CREATE ROLE hive LOGIN PASSWORD 'hive';
CREATE DATABASE metastore_src OWNER hive;
CREATE DATABASE metastore_dr OWNER hive;
CREATE DATABASE schema_registry OWNER hive;
