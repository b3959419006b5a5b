package render

import (
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// Redacted replaces every value of a Secret in printed output.
const Redacted = "REDACTED"

// Write prints objects as a YAML stream, each preceded by a comment naming its unit and origin.
// Secret values are replaced by Redacted unless showSecrets is set.
func Write(w io.Writer, objs []Object, showSecrets bool) error {
	for _, o := range objs {
		obj := o.Object
		if obj.GetKind() == "Secret" && obj.GetAPIVersion() == "v1" && !showSecrets {
			obj = obj.DeepCopy()
			for _, field := range []string{"data", "stringData"} {
				if m, ok := obj.Object[field].(map[string]any); ok {
					for k := range m {
						m[k] = Redacted
					}
				}
			}
		}
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			return fmt.Errorf("print %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		unit := o.Unit
		if unit == "" {
			unit = "-"
		}
		if _, err := fmt.Fprintf(w, "---\n# unit: %s, from: %s\n%s", unit, o.Origin, data); err != nil {
			return err
		}
	}
	return nil
}
