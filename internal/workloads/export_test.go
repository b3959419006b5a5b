package workloads

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// Policy is an admission policy as this package evaluates it, for the tests that compare it with
// the API server and break each of its rules.
type Policy = policy

func CompilePolicy(obj *unstructured.Unstructured) (*Policy, error) { return compilePolicy(obj) }

func (p *policy) Admit(obj *unstructured.Unstructured, namespace, user string, params *unstructured.Unstructured) ([]string, error) {
	return p.admit(obj, namespace, user, params)
}

func (p *policy) AdmitRequest(operation string, obj, old *unstructured.Unstructured, namespace, user string, params *unstructured.Unstructured) ([]string, error) {
	return p.admitRequest(operation, obj, old, namespace, user, params)
}

func (p *policy) Validations() int { return len(p.validations) }

// Without is the policy less its validation i.
func (p *policy) Without(i int) *Policy {
	q := *p
	q.validations = append(append([]validation{}, p.validations[:i]...), p.validations[i+1:]...)
	return &q
}
