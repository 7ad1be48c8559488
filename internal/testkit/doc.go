// Package testkit is what every test package that needs real servers
// shares, so that each starts Postgres, Kafka and the relay the same way
// and cleans up after itself the same way.
//
// A package's TestMain (Main) starts its servers once, through the scripts
// the demo uses (StartServers; StartPostgres, StartKafkaCluster and the
// proxies for another layout), and builds the relay (BuildRelay). A test
// then takes its own outbox table, slot and publication (NewOutbox), runs
// the built relay as a process (StartRelay), and asserts on what a consumer
// reads from Kafka (Consume) and on pg_replication_slots
// (Outbox.Confirmed). What a test starts is stopped by t.Cleanup, by PID,
// however the test ends.
package testkit
