# Airflow image for the layout pipeline (built by docker-compose.yml, context = project root).
#
# - a JRE, because SparkSubmitOperator runs spark-submit in *client* mode: the
#   Spark driver is a JVM inside the Airflow container that runs the task;
# - the layout_core package with its pinned dependencies (pyspark 4.3.0, sqlglot, ...),
#   installed from a copy of pyproject.toml + layout_core/ (rebuild the image after
#   changing either: `docker compose build`);
# - the Apache Spark provider (SparkSubmitOperator / spark_default connection).
#
# Note: without a .dockerignore the classic builder sends the whole project
# (including .venv) as build context; BuildKit only transfers the COPY sources.
ARG AIRFLOW_IMAGE=apache/airflow:3.3.2-python3.11
FROM ${AIRFLOW_IMAGE}

ARG AIRFLOW_VERSION=3.3.2
# Must equal the Spark version of the standalone cluster (SPARK_IMAGE in docker-compose.yml).
ARG PYSPARK_VERSION=4.3.0

USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* \
 && ln -sfn "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/java-17 \
 && mkdir -p /opt/layout /warehouse \
 && chown airflow:0 /opt/layout \
 && chown 185:0 /warehouse \
 && chmod 2775 /warehouse
# Architecture-independent JAVA_HOME (the real folder ends in -amd64 / -arm64).
ENV JAVA_HOME=/usr/lib/jvm/java-17

USER airflow
WORKDIR /opt/layout
COPY --chown=airflow:0 pyproject.toml /opt/layout/
COPY --chown=airflow:0 layout_core /opt/layout/layout_core

# apache-airflow is pinned on the command line too, so pip can never swap the
# image's Airflow for another release while resolving our dependencies.
# The Spark provider pulls in pyspark-client, whose files overwrite pyspark's:
# reinstall pyspark (no deps) afterwards and fail the build if the version is wrong.
RUN pip install --no-cache-dir \
        "apache-airflow==${AIRFLOW_VERSION}" \
        "apache-airflow-providers-apache-spark>=6.3,<7" \
        . \
 && pip install --no-cache-dir --force-reinstall --no-deps "pyspark==${PYSPARK_VERSION}" \
 && python -c "import sys, pyspark; v = pyspark.__version__; sys.exit(0 if v == '${PYSPARK_VERSION}' else 'pyspark is ' + v)" \
 && command -v spark-submit \
 && rm -rf /opt/layout/build

WORKDIR /opt/airflow
