"""Counts the CloudEvents on one Kafka topic by type, with Apache Spark.

One real analytics engine reading what outbox-cdc wrote: a Spark batch query
over the Kafka source (spark.read.format("kafka"), from the earliest offsets
to the latest, read_committed), each record value parsed as a CloudEvents 1.0
structured-mode JSON document (--envelope cloudevents-structured). For each
type it counts the records and the distinct ids: at-least-once delivery may
repeat a record, never lose one, so the distinct count is what the writer
committed and the difference is the duplicates.

With --mode binary the attributes come from the ce_* headers instead
(--envelope cloudevents, the payload unchanged as the value).

The result is one JSON document written to --out:

    {"engine": "spark 3.5.7", "query": "batch", "records": 1200, "distinct_ids": 1200,
     "invalid": 0, "without_data": 0, "elapsed_s": 9.1,
     "types": {"order.created": {"records": 400, "distinct_ids": 400}, ...}}

"invalid" counts records that are not a CloudEvent (not a JSON object, or
without specversion 1.0 or one of the other required attributes id, source
and type): they are left out of "types". "without_data" counts the valid ones
that carry neither data (or a JSON null) nor data_base64, which CloudEvents
allows and an outbox row with a payload never gives. Run it through scripts/analytics/spark.sh count,
which installs Spark and its Kafka source first.
"""

import argparse
import glob
import json
import os
import sys
import time

# Spark's own logging goes to stderr; the driver binds to loopback only, so
# that no host name lookup or outside interface is involved.
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from pyspark.sql import SparkSession  # noqa: E402  (after SPARK_LOCAL_IP)
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.types import StringType, StructField, StructType  # noqa: E402

# The structured-mode attributes the count needs. data is kept as text
# (Spark's JSON reader turns any JSON value into its text for a string
# field) only to tell "present" from "absent".
EVENT_SCHEMA = StructType(
    [StructField(name, StringType()) for name in
     ("specversion", "id", "source", "type", "time", "subject", "data", "data_base64")]
)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--brokers", required=True, help="Kafka bootstrap servers, host:port[,host:port]")
    p.add_argument("--topic", required=True, help="the one topic to read")
    p.add_argument("--out", required=True, help="file the JSON result is written to")
    p.add_argument("--jars", required=True, help="directory of Spark's Kafka source jars (spark.sh fetch)")
    p.add_argument("--mode", choices=("structured", "binary"), default="structured",
                   help="structured: the value is the CloudEvent (default); binary: ce_* headers")
    return p.parse_args(argv)


def session(jars_dir):
    jars = sorted(glob.glob(os.path.join(jars_dir, "*.jar")))
    if not jars:
        raise SystemExit(f"count_by_type: no jars in {jars_dir} (run scripts/analytics/spark.sh fetch)")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("outbox-cdc-count-by-type")
        .config("spark.jars", ",".join(jars))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    return spark


def read_topic(spark, brokers, topic, binary):
    """The whole topic as committed now: earliest to latest, read_committed."""
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", brokers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafka.isolation.level", "read_committed")
        .option("includeHeaders", "true" if binary else "false")
        .load()
    )


def events(raw, binary):
    """One row per record: specversion, id, source, type and has_data."""
    if binary:
        def header(key):
            return F.expr(f"CAST(filter(headers, h -> h.key = '{key}')[0].value AS STRING)")
        return raw.select(
            header("ce_specversion").alias("specversion"), header("ce_id").alias("id"),
            header("ce_source").alias("source"), header("ce_type").alias("type"),
            F.lit(True).alias("has_data"))
    # from_json gives null for a value that is not a JSON object.
    ev = F.from_json(F.col("value").cast("string"), EVENT_SCHEMA)
    return raw.select(ev.alias("e")).select(
        "e.specversion", "e.id", "e.source", "e.type",
        (F.col("e.data").isNotNull() | F.col("e.data_base64").isNotNull()).alias("has_data"))


def count(df):
    valid = (F.col("specversion") == "1.0") & F.col("id").isNotNull() & F.col("type").isNotNull() \
        & F.col("source").isNotNull()
    df = df.withColumn("valid", F.coalesce(valid, F.lit(False))).cache()
    totals = df.agg(F.count(F.lit(1)).alias("records"),
                    F.sum(F.when(~F.col("valid"), 1).otherwise(0)).alias("invalid"),
                    F.sum(F.when(F.col("valid") & ~F.col("has_data"), 1).otherwise(0)).alias("without_data"),
                    F.countDistinct(F.when(F.col("valid"), F.col("id"))).alias("distinct_ids")).first()
    per_type = (df.where("valid").groupBy("type")
                .agg(F.count(F.lit(1)).alias("records"), F.countDistinct("id").alias("distinct_ids"))
                .collect())
    return {
        "records": totals["records"],
        "distinct_ids": totals["distinct_ids"],
        "invalid": totals["invalid"] or 0,
        "without_data": totals["without_data"] or 0,
        "types": {r["type"]: {"records": r["records"], "distinct_ids": r["distinct_ids"]}
                  for r in sorted(per_type, key=lambda r: r["type"])},
    }


def main(argv):
    args = parse_args(argv)
    began = time.monotonic()
    spark = session(args.jars)
    version = spark.version
    try:
        binary = args.mode == "binary"
        result = count(events(read_topic(spark, args.brokers, args.topic, binary), binary))
    finally:
        spark.stop()
    result.update({"engine": f"spark {version}", "query": "batch", "mode": args.mode,
                   "topic": args.topic, "elapsed_s": round(time.monotonic() - began, 2)})
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, args.out)  # a reader never sees half a result
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
