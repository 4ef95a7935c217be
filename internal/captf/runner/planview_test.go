package runner

import (
	"reflect"
	"testing"
)

func TestBackendLabels(t *testing.T) {
	got := backendLabels([]string{"secret_suffix=abc", `labels={"a.io/x"="1","clusterctl.cluster.x-k8s.io/move"="","k"="v"}`})
	want := map[string]string{"a.io/x": "1", "clusterctl.cluster.x-k8s.io/move": "", "k": "v"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%v", got)
	}
	if len(backendLabels(nil)) != 0 {
		t.Fatal("labels from nothing")
	}
}
