"""Test harness for kactor's real-client suites: brokers (kactor or Apache Kafka 4.4.0), raw wire
helpers and the Kafka 4.4.0 command-line tools."""
