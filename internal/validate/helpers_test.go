package validate_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/schemas"
)

func newValidator(t *testing.T, objs []*unstructured.Unstructured) *schemas.Validator {
	t.Helper()
	v, err := schemas.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.AddCRDs(objs); err != nil {
		t.Fatal(err)
	}
	return v
}
