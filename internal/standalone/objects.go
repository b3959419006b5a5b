package standalone

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"cluster-init.dev/cluster-init/internal/atomicfile"
)

// objectsPath is objects/, finishing a replacement a killed command left half-done: objects/ is
// renamed to objects.old/ only once objects.new/ is complete, so objects.old/ without objects/
// means objects.new/ is whole. Anything else staged is partial and dropped.
func (d Dir) objectsPath() (string, error) {
	cur := d.file(objectsDir)
	staged, old := cur+stagingSuffix, cur+replacedSuffix
	if _, err := os.Stat(cur); errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(old); err == nil {
			if err := os.Rename(staged, cur); err != nil {
				return "", fmt.Errorf("finish replacing %s: %w", cur, err)
			}
		}
	}
	_ = os.RemoveAll(old)
	_ = os.RemoveAll(staged)
	return cur, nil
}

// RemoveLeftovers removes what a killed command may have left in clear: the directories of an
// export (clusterctl writes the Secrets unencrypted) or of a restore (decrypted). Called with
// the lock held.
func (d Dir) RemoveLeftovers() {
	leftovers, _ := filepath.Glob(d.file(".export-*"))
	for _, p := range append(leftovers, d.file(".restore")) {
		_ = os.RemoveAll(p)
	}
}

// StoreObjects replaces objects/ by what clusterctl wrote into from (one JSON object per file,
// named Kind_namespace_name.yaml), encrypting every Secret. The old objects stay until the new
// ones are complete.
func (d Dir) StoreObjects(k *Key, from string) (count int, err error) {
	cur, err := d.objectsPath()
	if err != nil {
		return 0, err
	}
	staged := cur + stagingSuffix
	if err := os.MkdirAll(staged, dirMode); err != nil {
		return 0, err
	}
	files, err := os.ReadDir(from)
	if err != nil {
		return 0, fmt.Errorf("read the exported objects: %w", err)
	}
	clusters := 0
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(from, f.Name()))
		if err != nil {
			return 0, err
		}
		var meta struct{ Kind, APIVersion string }
		if err := json.Unmarshal(data, &meta); err != nil {
			return 0, fmt.Errorf("exported object %s: %w", f.Name(), err)
		}
		target := filepath.Join(staged, f.Name())
		switch {
		case meta.Kind == "Secret" && meta.APIVersion == "v1":
			err = k.writeSealed(target, data)
		default:
			if meta.Kind == "Cluster" && strings.HasPrefix(meta.APIVersion, "cluster.x-k8s.io/") {
				clusters++
			}
			err = atomicfile.Write(target, data, fileMode)
		}
		if err != nil {
			return 0, err
		}
	}
	if clusters != 1 {
		_ = os.RemoveAll(staged)
		return 0, fmt.Errorf("the export holds %d Cluster objects, expected exactly 1: the state is left as it was", clusters)
	}
	if _, err := os.Stat(cur); err == nil {
		if err := os.Rename(cur, cur+replacedSuffix); err != nil {
			return 0, err
		}
	}
	if err := os.Rename(staged, cur); err != nil {
		return 0, err
	}
	_ = os.RemoveAll(cur + replacedSuffix)
	return len(files), nil
}

// RestoreDir writes the objects, decrypted, into a private directory for clusterctl move
// --from-directory; done removes it.
func (d Dir) RestoreDir(k *Key) (dir string, done func(), err error) {
	cur, err := d.objectsPath()
	if err != nil {
		return "", nil, err
	}
	dir = d.file(".restore")
	done = func() { _ = os.RemoveAll(dir) }
	done()
	if err := os.Mkdir(dir, dirMode); err != nil {
		return "", nil, err
	}
	files, err := os.ReadDir(cur)
	if err != nil {
		done()
		return "", nil, fmt.Errorf("the objects of standalone cluster %s: %w", d.Environment, err)
	}
	for _, f := range files {
		data, err := k.readFile(filepath.Join(cur, f.Name()))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, strings.TrimSuffix(f.Name(), sealedSuffix)), data, fileMode)
		}
		if err != nil {
			done()
			return "", nil, err
		}
	}
	return dir, done, nil
}

// Check verifies, in seconds and before anything is created, that the state can manage its
// cluster again: state.json, the Cluster among the objects, every encrypted file decrypted by
// the key, the management files.
func (d Dir) Check(k *Key) (*State, error) {
	st, err := d.Load()
	if err != nil {
		return nil, err
	}
	if !k.Opens(st.Recipient) {
		return nil, fmt.Errorf("standalone cluster %s: its secrets are encrypted to the age key %s, which %s is not: give that key with --age-key-file", st.Environment, st.Recipient, k.Source)
	}
	cur, err := d.objectsPath()
	if err != nil {
		return nil, err
	}
	files, err := os.ReadDir(cur)
	if err != nil {
		return nil, fmt.Errorf("standalone cluster %s: damaged state: %w", st.Environment, err)
	}
	clusterFile := fmt.Sprintf("Cluster_%s_%s.yaml", st.Namespace, st.Cluster)
	found := false
	for _, f := range files {
		path := filepath.Join(cur, f.Name())
		data, err := k.readFile(path) // its errors name the file
		if err == nil && !json.Valid(data) {
			err = fmt.Errorf("%s: not a JSON object", path)
		}
		if err != nil {
			return nil, fmt.Errorf("standalone cluster %s: damaged state: %w", st.Environment, err)
		}
		found = found || f.Name() == clusterFile
	}
	if !found {
		return nil, fmt.Errorf("standalone cluster %s: damaged state: %s holds no %s", st.Environment, cur, clusterFile)
	}
	for _, u := range st.ManagementUnits {
		if _, err := d.ManagementObjects(k, u.Name); err != nil {
			return nil, fmt.Errorf("standalone cluster %s: damaged state: %w", st.Environment, err)
		}
	}
	return st, nil
}

func (d Dir) managementFile(unit string, sealed bool) string {
	p := filepath.Join(d.Path, managementDir, unit+".yaml")
	if sealed {
		p += sealedSuffix
	}
	return p
}

// StoreManagement writes what a unit of the temporary management cluster applies (a multi-document
// YAML), encrypted if it holds a Secret.
func (d Dir) StoreManagement(k *Key, unit string, yamlDocs []byte, hasSecret bool) error {
	for _, sealed := range []bool{true, false} {
		_ = os.Remove(d.managementFile(unit, sealed))
	}
	if hasSecret {
		return k.writeSealed(d.managementFile(unit, false), yamlDocs)
	}
	return atomicfile.Write(d.managementFile(unit, false), yamlDocs, fileMode)
}

// ManagementObjects reads what StoreManagement wrote for unit.
func (d Dir) ManagementObjects(k *Key, unit string) ([]byte, error) {
	for _, sealed := range []bool{false, true} {
		data, err := k.readFile(d.managementFile(unit, sealed))
		if err == nil {
			return data, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%s: missing", d.managementFile(unit, false))
}

// StoreValues keeps the values the cluster was created with, encrypted.
func (d Dir) StoreValues(k *Key, data []byte) error {
	return k.writeSealed(strings.TrimSuffix(d.file(valuesFile), sealedSuffix), data)
}

// WriteKubeconfig writes the cluster's admin kubeconfig (0600).
func (d Dir) WriteKubeconfig(data []byte) error {
	return atomicfile.Write(d.KubeconfigPath(), data, fileMode)
}

// Files lists the state's files relative to its directory (what an export carries), sorted.
func (d Dir) Files() ([]string, error) {
	if _, err := d.objectsPath(); err != nil {
		return nil, err
	}
	var out []string
	err := filepath.WalkDir(d.Path, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(d.Path, path)
		if e.IsDir() {
			if path != d.Path && rel != objectsDir && rel != managementDir {
				return filepath.SkipDir
			}
			return nil
		}
		if !allowedInArchive(filepath.ToSlash(rel)) {
			return nil
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	sort.Strings(out)
	return out, err
}
