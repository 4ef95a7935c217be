package manifest

import "testing"

func TestObjects(t *testing.T) {
	objs, err := Objects([]byte("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n\n---\n{\"apiVersion\": \"v1\", \"kind\": \"Secret\", \"metadata\": {\"name\": \"b\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].GetKind() != "ConfigMap" || objs[1].GetName() != "b" {
		t.Fatalf("objects = %v", objs)
	}
	if _, err := Objects([]byte("kind: [unclosed\n")); err == nil {
		t.Error("a malformed document gave no error")
	}
}
