package translate

import "sort"

// NeverPublicPorts are the container ports that a `host:container` entry never makes public
// (spec, Limits): databases, caches and debuggers that must not face the internet by accident.
// They can still be exposed on purpose through endpoints. The key is the port, the value the
// product it belongs to (used in the warning that explains why the port stayed private).
//
// RethinkDB: the spec's table writes "8280, 15, 29015, 28015" as one run of digits and then says
// the separate ports are 28015 and 29015, which matches RethinkDB's defaults (28015 driver port,
// 29015 cluster port; its web UI is 8080). So 28015 and 29015 are listed, and neither 8280 nor 15.
var NeverPublicPorts = map[int32]string{
	3306: "MySQL",
	1521: "OracleDB", 1830: "OracleDB",
	5432: "PostgreSQL",
	1433: "SQL Server", 1434: "SQL Server",
	7210: "MaxDB",
	7473: "Neo4j",
	8529: "ArangoDB",
	7000: "Cassandra", 7001: "Cassandra", 9042: "Cassandra",
	8086: "InfluxDB",
	9200: "Elasticsearch", 9300: "Elasticsearch",
	5984:  "CouchDB",
	27017: "MongoDB", 27018: "MongoDB", 27019: "MongoDB", 28017: "MongoDB",
	6379: "Redis",
	8087: "Riak", 8088: "Riak",
	28015: "RethinkDB", 29015: "RethinkDB",
	7574: "Solr", 8983: "Solr",
	2345: "Go debugger",
	5858: "Node debugger", 9229: "Node debugger",
	5005: "Java debugger",
	1234: "Ruby debugger",
	4444: "Python debugger", 5678: "Python debugger",
}

// IsNeverPublic reports whether a container port stays private even when written host:container.
func IsNeverPublic(containerPort int32) bool {
	_, ok := NeverPublicPorts[containerPort]
	return ok
}

// neverPublicList is the table's ports in ascending order (for tests and messages).
func neverPublicList() []int32 {
	out := make([]int32, 0, len(NeverPublicPorts))
	for p := range NeverPublicPorts {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
