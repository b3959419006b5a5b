package reconcileerrors

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Lines as CAPO v0.13 logs them (klog text) when its cloud refuses the credentials, around lines
// of other objects and other messages; and the JSON format of the same.
const textLog = `I1123 11:12:30.100000       1 openstackcluster_controller.go:90] "Reconciling OpenStackCluster" controller="openstackcluster" controllerKind="OpenStackCluster" namespace="cluster-init" name="management"
E1123 11:12:36.790688       1 controller.go:353] "Reconciler error" err="providerClient authentication err: Expected HTTP response code [201 202] when accessing [POST http://192.0.2.1:35357/v3/auth/tokens], but got 401 instead: {\"error\": {\"code\": 401}}" controller="openstackcluster" controllerGroup="infrastructure.cluster.x-k8s.io" controllerKind="OpenStackCluster" OpenStackCluster="cluster-init/management" namespace="cluster-init" name="management" reconcileID="1f"
E1123 11:12:38.000000       1 controller.go:353] "Reconciler error" err="another object's error" controller="openstackcluster" controllerKind="OpenStackCluster" namespace="cluster-init" name="other" reconcileID="2f"
E1123 11:12:39.357744       1 controller.go:353] "Reconciler error" err="providerClient authentication err: dial tcp 192.0.2.1:35357: connect: connection refused" controller="openstackcluster" controllerKind="OpenStackCluster" namespace="cluster-init" name="management" reconcileID="3f"
E1123 11:12:40.000000       1 controller.go:353] "Reconciler error" err="a machine's error" controller="openstackmachine" controllerKind="OpenStackMachine" namespace="cluster-init" name="management" reconcileID="4f"
`

const jsonLog = `{"ts":"2026-11-23T11:12:36.790Z","level":"error","msg":"Reconciler error","controller":"openstackcluster","controllerKind":"OpenStackCluster","namespace":"cluster-init","name":"management","err":"first"}
{"ts":"2026-11-23T11:12:37.000Z","level":"info","msg":"Reconciling","controllerKind":"OpenStackCluster","namespace":"cluster-init","name":"management","err":"not an error line"}
{"ts":"2026-11-23T11:12:39.357Z","level":"error","msg":"Reconciler error","controller":"openstackcluster","controllerKind":"OpenStackCluster","namespace":"cluster-init","name":"management","err":"providerClient authentication err: dial tcp 192.0.2.1:35357: connect: connection refused"}
`

// stamped prefixes each line with the kubelet's timestamp, as the log API's timestamps option
// returns it: one second apart from start.
func stamped(log string, start time.Time) string {
	var b strings.Builder
	for i, line := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		fmt.Fprintf(&b, "%s %s\n", start.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano), line)
	}
	return b.String()
}

func TestTheLastErrorOfTheObjectIsFound(t *testing.T) {
	// The kubelet's timestamps are read as times: a year's last second, then the next year's.
	start := time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)
	for format, log := range map[string]string{"text": textLog, "json": jsonLog} {
		f, ok := scan(strings.NewReader(stamped(log, start)), "OpenStackCluster", "cluster-init", "management")
		if !ok {
			t.Fatalf("%s: no error found", format)
		}
		if want := "providerClient authentication err: dial tcp 192.0.2.1:35357: connect: connection refused"; f.Error != want {
			t.Errorf("%s: error %q, want %q", format, f.Error, want)
		}
		if f.Count != 2 {
			t.Errorf("%s: %d errors counted, want the object's 2", format, f.Count)
		}
		if want := start.Add(map[string]time.Duration{"text": 3, "json": 2}[format] * time.Second); !f.Time.Equal(want) {
			t.Errorf("%s: time %s, want the last line's, %s", format, f.Time, want)
		}
	}
	// A line without the kubelet's timestamp is not read.
	if _, ok := scan(strings.NewReader(textLog), "OpenStackCluster", "cluster-init", "management"); ok {
		t.Error("an error found in lines without the kubelet's timestamps")
	}
	// The quoted value is read whole, escaped quotes included.
	f, _ := scan(strings.NewReader(stamped(strings.SplitN(textLog, "\n", 3)[1], start)), "OpenStackCluster", "cluster-init", "management")
	if !strings.HasSuffix(f.Error, `{"error": {"code": 401}}`) {
		t.Errorf("quoted error not unquoted whole: %q", f.Error)
	}
	if _, ok := scan(strings.NewReader(stamped(textLog, start)), "OpenStackCluster", "cluster-init", "absent"); ok {
		t.Error("an error found for an object that has none")
	}
}

// CAPO logs a machine's server creation refused under its OpenStackServer, named after the
// OpenStackMachine: read for any kind, the error is found and says which kind it was.
func TestTheErrorOfAnObjectNamedAfterTheMachineIsFound(t *testing.T) {
	log := `E1127 07:50:12.000000       1 controller.go:353] "Reconciler error" err="create OpenStack instance: Expected HTTP response code [202] when accessing [POST http://172.18.0.1:8788/compute/v2.1/servers], but got 403 instead: {\"forbidden\": {\"code\": 403, \"message\": \"Quota exceeded for instances: Requested 1, but already used 2 of 2 instances\"}}" controller="openstackserver" controllerKind="OpenStackServer" OpenStackServer="cluster-init/management-workers-x-y" namespace="cluster-init" name="management-workers-x-y" reconcileID="9f"
`
	start := time.Date(2026, 11, 27, 7, 50, 12, 0, time.UTC)
	if _, ok := scan(strings.NewReader(stamped(log, start)), "OpenStackMachine", "cluster-init", "management-workers-x-y"); ok {
		t.Error("found under the OpenStackMachine's kind, which logged nothing")
	}
	f, ok := scan(strings.NewReader(stamped(log, start)), "", "cluster-init", "management-workers-x-y")
	if !ok || f.Kind != "OpenStackServer" || !strings.Contains(f.Error, "Quota exceeded for instances") {
		t.Errorf("any kind: found %v, %+v", ok, f)
	}
}
