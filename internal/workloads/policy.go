package workloads

import (
	"errors"
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/cel/environment"

	"cluster-init.dev/cluster-init/internal/names"
)

// PolicyName is the admission policy of what a tenant writes (charts/workload-clusters); its
// parameters are the ConfigMap names.TenantParamsConfigMap of each tenant's namespace.
const PolicyName = "cluster-init-tenant-releases"

// policy is a ValidatingAdmissionPolicy compiled with the API server's own CEL environment (its
// libraries: isCIDR, split, …), evaluated here as the API server evaluates it: match conditions,
// then variables in order, then every validation, with its message or message expression.
type policy struct {
	name string
	// parameterized policies admit nothing without their parameters.
	parameterized bool
	env           *cel.Env
	matches       []cel.Program
	variables     []namedProgram
	validations   []validation
}

type namedProgram struct {
	name string
	prg  cel.Program
}

type validation struct {
	prg, message cel.Program
	text         string
}

func compilePolicy(obj *unstructured.Unstructured) (*policy, error) {
	if obj == nil {
		return nil, errors.New("the workload-clusters unit renders no admission policy " + PolicyName)
	}
	base := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	set, err := base.Extend(environment.VersionedOptions{
		IntroducedVersion: environment.DefaultCompatibilityVersion(),
		EnvOptions: []cel.EnvOption{
			cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType),
			cel.Variable("params", cel.DynType), cel.Variable("request", cel.DynType),
			cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)),
		},
	})
	if err != nil {
		return nil, err
	}
	env, err := set.Env(environment.NewExpressions)
	if err != nil {
		return nil, err
	}
	_, parameterized, _ := unstructured.NestedMap(obj.Object, "spec", "paramKind")
	p := &policy{name: obj.GetName(), env: env, parameterized: parameterized}
	compile := func(field, expr string) (cel.Program, error) {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			return nil, fmt.Errorf("admission policy %s: %s %q: %w", p.name, field, expr, iss.Err())
		}
		return env.Program(ast)
	}
	list := func(field string) []map[string]any {
		items, _, _ := unstructured.NestedSlice(obj.Object, "spec", field)
		var out []map[string]any
		for _, i := range items {
			if m, ok := i.(map[string]any); ok {
				out = append(out, m)
			}
		}
		return out
	}
	for _, m := range list("matchConditions") {
		prg, err := compile("matchCondition", str(m, "expression"))
		if err != nil {
			return nil, err
		}
		p.matches = append(p.matches, prg)
	}
	for _, v := range list("variables") {
		prg, err := compile("variable", str(v, "expression"))
		if err != nil {
			return nil, err
		}
		p.variables = append(p.variables, namedProgram{name: str(v, "name"), prg: prg})
	}
	for _, v := range list("validations") {
		prg, err := compile("validation", str(v, "expression"))
		if err != nil {
			return nil, err
		}
		val := validation{prg: prg, text: str(v, "message")}
		if me := str(v, "messageExpression"); me != "" {
			if val.message, err = compile("messageExpression", me); err != nil {
				return nil, err
			}
		}
		p.validations = append(p.validations, val)
	}
	return p, nil
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// admit returns the messages of the validations obj fails, applied in namespace by user, with the
// tenant's parameters (a ConfigMap); nothing when the policy does not match the request.
func (p *policy) admit(obj *unstructured.Unstructured, namespace, user string, params *unstructured.Unstructured) ([]string, error) {
	return p.admitRequest("CREATE", obj, nil, namespace, user, params)
}

// admitRequest is admit for an operation (CREATE, UPDATE or DELETE) of obj, which was old (nil for
// a creation; obj is nil for a deletion).
func (p *policy) admitRequest(operation string, obj, old *unstructured.Unstructured, namespace, user string, params *unstructured.Unstructured) ([]string, error) {
	request := map[string]any{"namespace": namespace, "operation": operation, "userInfo": map[string]any{"username": user}}
	var paramsVal, objVal, oldVal any
	if params != nil {
		paramsVal = params.Object
	}
	if obj != nil {
		objVal = obj.Object
	}
	if old != nil {
		oldVal = old.Object
	}
	vars := map[string]any{}
	activation := map[string]any{"object": objVal, "oldObject": oldVal, "params": paramsVal, "request": request, "variables": vars}
	for _, m := range p.matches {
		out, _, err := m.Eval(activation)
		if err != nil {
			return nil, fmt.Errorf("admission policy %s: match condition: %w", p.name, err)
		}
		if out != types.True {
			return nil, nil
		}
	}
	if params == nil && p.parameterized {
		return []string{fmt.Sprintf("no parameters (ConfigMap %s/%s): the namespace admits nothing", namespace, names.TenantParamsConfigMap)}, nil
	}
	for _, v := range p.variables {
		out, _, err := v.prg.Eval(activation)
		if err != nil {
			// The API server evaluates a variable when a validation reads it: one that cannot be
			// evaluated for this object (another kind's fields) fails only what reads it.
			out = types.NewErr("variable %s: %v", v.name, err)
		}
		vars[v.name] = out
	}
	var refused []string
	for _, v := range p.validations {
		out, _, err := v.prg.Eval(activation)
		if err == nil && out == types.True {
			continue
		}
		msg := v.text
		if v.message != nil {
			if m, _, merr := v.message.Eval(activation); merr == nil {
				if s, ok := m.Value().(string); ok {
					msg = s
				}
			}
		}
		if err != nil {
			msg = fmt.Sprintf("%s (%v)", msg, err)
		}
		refused = append(refused, msg)
	}
	return refused, nil
}
