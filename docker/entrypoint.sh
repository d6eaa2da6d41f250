#!/bin/bash
# The image's ENTRYPOINT, one script for every pod Flyte starts from this image:
#   driver ...     the Spark operator's driver pod: spark-submit in client mode with the operator's arguments
#   executor       the Spark operator's executor pods: Spark's KubernetesExecutorBackend (settings from SPARK_* env)
#   anything else  run as given (pass-through): plain Flyte tasks (pyflyte-execute ...), the MPI launcher
#                  (mpirun/horovodrun ...); MPI workers get their own command from the operator.
# It does what apache/spark's kubernetes/dockerfiles/spark/entrypoint.sh does, for a Spark that comes from the pyspark
# wheel (SPARK_HOME = the pyspark package folder) instead of a Spark distribution under /opt/spark.
set -eo pipefail

# Spark needs a passwd entry for the user it runs as (OpenShift-style random UIDs have none).
if ! getent passwd "$(id -u)" >/dev/null 2>&1 && [ -w /etc/passwd ]; then
    echo "$(id -u):x:$(id -u):$(id -g):${SPARK_USER_NAME:-anonymous uid}:${SPARK_HOME:-/tmp}:/bin/false" >> /etc/passwd
fi

spark_env() {
    : "${SPARK_HOME:?SPARK_HOME must point at the Spark installation (the pyspark package folder)}"
    if [ -z "${JAVA_HOME:-}" ]; then
        JAVA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")
        export JAVA_HOME
    fi
    SPARK_CLASSPATH="${SPARK_CLASSPATH:-}:${SPARK_HOME}/jars/*"
    [ -n "${SPARK_EXTRA_CLASSPATH:-}" ] && SPARK_CLASSPATH="$SPARK_CLASSPATH:$SPARK_EXTRA_CLASSPATH"
    if [ -n "${HADOOP_HOME:-}" ] && [ -z "${SPARK_DIST_CLASSPATH:-}" ]; then
        SPARK_DIST_CLASSPATH="$("$HADOOP_HOME/bin/hadoop" classpath)"
        export SPARK_DIST_CLASSPATH
    fi
    [ -n "${HADOOP_CONF_DIR:-}" ] && SPARK_CLASSPATH="$HADOOP_CONF_DIR:$SPARK_CLASSPATH"
    SPARK_CLASSPATH="${SPARK_CONF_DIR:-$SPARK_HOME/conf}:$SPARK_CLASSPATH"
    # Java options the operator passes as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... in that order.
    SPARK_EXECUTOR_JAVA_OPTS=()
    while IFS= read -r opt; do
        [ -n "$opt" ] && SPARK_EXECUTOR_JAVA_OPTS+=("$opt")
    done < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/^[^=]*=//')
    return 0
}

case "${1:-}" in
    driver)
        shift
        spark_env
        CMD=("$SPARK_HOME/bin/spark-submit"
             --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:?the operator sets the driver pod IP here}"
             --deploy-mode client
             "$@")
        ;;
    executor)
        shift
        spark_env
        CMD=("$JAVA_HOME/bin/java"
             "${SPARK_EXECUTOR_JAVA_OPTS[@]}"
             "-Xms${SPARK_EXECUTOR_MEMORY}" "-Xmx${SPARK_EXECUTOR_MEMORY}"
             -cp "$SPARK_CLASSPATH:${SPARK_DIST_CLASSPATH:-}"
             org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend
             --driver-url "$SPARK_DRIVER_URL"
             --executor-id "$SPARK_EXECUTOR_ID"
             --cores "$SPARK_EXECUTOR_CORES"
             --app-id "$SPARK_APPLICATION_ID"
             --hostname "$SPARK_EXECUTOR_POD_IP"
             --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID"
             --podName "$SPARK_EXECUTOR_POD_NAME")
        ;;
    "")
        echo "entrypoint.sh: no command given (expected driver, executor, or a command to run)" >&2
        exit 2
        ;;
    *)
        CMD=("$@")
        ;;
esac

echo "entrypoint.sh: ${CMD[*]}" >&2
# Under tini (as Spark's image does) so signals reach the command and zombies are reaped; tini is in the image.
if command -v tini >/dev/null 2>&1; then
    exec tini -s -- "${CMD[@]}"
fi
exec "${CMD[@]}"
