package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Apply creates every object of a multi-document YAML file (or of every .yaml file in a folder),
// replacing objects that exist.
func (e *Env) Apply(ctx context.Context, path string) error {
	files := []string{path}
	if st, err := os.Stat(path); err != nil {
		return err
	} else if st.IsDir() {
		if files, err = filepath.Glob(filepath.Join(path, "*.yaml")); err != nil {
			return err
		}
	}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return fmt.Errorf("%s: %w", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := e.Client.Create(ctx, u); apierrors.IsAlreadyExists(err) {
				old := &unstructured.Unstructured{}
				old.SetGroupVersionKind(u.GroupVersionKind())
				if err := e.Client.Get(ctx, client.ObjectKeyFromObject(u), old); err != nil {
					return err
				}
				u.SetResourceVersion(old.GetResourceVersion())
				err = e.Client.Update(ctx, u)
				if err != nil {
					return fmt.Errorf("%s: update %s %s: %w", f, u.GetKind(), u.GetName(), err)
				}
			} else if err != nil {
				return fmt.Errorf("%s: create %s %s: %w", f, u.GetKind(), u.GetName(), err)
			}
		}
	}
	return nil
}

// installAdmissionPolicies applies config/admission and waits until the API server enforces
// them: policies are compiled asynchronously, and a test racing that would see them as absent.
func (e *Env) installAdmissionPolicies(ctx context.Context) error {
	if err := e.Apply(ctx, filepath.Join(e.Root, "config", "admission")); err != nil {
		return err
	}
	probe := TerraformCluster("default", "admission-probe", "probe", "example.com/probe:v1")
	probe.Spec.Variables = map[string]apiextensionsv1.JSON{"captf_probe": {Raw: []byte(`1`)}}
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := e.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("admission policies not enforced after 60s (probe got %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
