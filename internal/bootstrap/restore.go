package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"filippo.io/age"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"

	"cluster-init.dev/cluster-init/internal/atomicfile"
	"cluster-init.dev/cluster-init/internal/backup"
	"cluster-init.dev/cluster-init/internal/backupjob"
	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/restore"
)

// RestoreOptions are the options of Restore (`bootstrap restore ENV`).
type RestoreOptions struct {
	Common
	Source string
	// From names the backup (its name, or the start of it); empty: the newest.
	From string
	// Identities decrypt the backup (the environment's backup key).
	Identities []age.Identity
	// StoreEndpoint, if set, is the store's address from this machine.
	StoreEndpoint string
}

// Restore makes the environment a new management cluster from a backup of the one it lost: the
// backup is read and checked first (another environment's, a newer format, a damaged archive or
// the wrong key are refused before anything is created), then the bootstrap flow makes the
// cluster from git with its tenants held, and the restore (internal/restore) brings the backup's
// workload clusters in before it releases them. Run again, it continues: within the bootstrap
// flow as a bootstrap does, then from the restore's record in the new management cluster.
func Restore(ctx context.Context, opts RestoreOptions) (*Result, error) {
	s, err := newSessionBesideStandalone(opts.Common, opts.Source)
	if err != nil {
		return &Result{}, err
	}
	defer s.close()
	r := &restoring{flow: flow{s: s}, opts: opts}
	create := r.upToUnits(r.validate(r.check), existingCluster{})
	phases := []phase{create[0], {"backup", r.readBackup}}
	for _, p := range create[1:] {
		if p.name == "environment" {
			p.run = r.holdAndApply
		}
		phases = append(phases, r.unlessResumed(p))
	}
	phases = append(phases,
		r.unlessResumed(phase{"finish", func(ctx context.Context) error {
			return finish(ctx, s, r.bc, r.plan.Settings, false)
		}}),
		phase{"restore", r.restore})
	return s.run(ctx, "", phases)
}

// restoring is what the phases of a restore hand each other.
type restoring struct {
	flow
	opts RestoreOptions
	// resumed: the new management cluster exists (its restore under way, or done): the bootstrap
	// phases are done.
	resumed bool
	// underWay: the state directory records a restore begun, from backup resumeFrom.
	underWay   bool
	resumeFrom string
	// lost is the kubeconfig of the lost cluster, which does not answer: kept aside once the
	// backup is known good.
	lost   string
	key    string
	backup backup.Contents
}

func (r *restoring) unlessResumed(p phase) phase {
	run := p.run
	p.run = func(ctx context.Context) error {
		if r.resumed {
			r.s.out.Log("the management cluster of the restore exists: nothing to do")
			return nil
		}
		return run(ctx)
	}
	return p
}

// lostAfter is how long a management cluster that does not answer is asked again before it is
// taken for lost: a cluster that is only slow must not get a second one beside it.
const lostAfter = 30 * time.Second

// check is validate's check: the environment as a new bootstrap validates it, with what the state
// directory says. A restore it records as begun continues (its management kubeconfig is the new
// cluster's). Otherwise a management cluster that answers is refused, unless a restore into it is
// recorded there (done, or under way); one that does not answer is the lost cluster.
func (r *restoring) check(ctx context.Context, s *session, src *publishedSource) (*render.Result, error) {
	env := s.opts.Env.Name
	dir := s.opts.StateDir.Environment(env)
	if data, err := os.ReadFile(dir.RestoreRecord()); err == nil {
		r.underWay, r.resumeFrom = true, strings.TrimSpace(string(data))
		s.out.Log("continuing the restore of %s from backup %s (state %s)", env, r.resumeFrom, dir.RestoreRecord())
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("environment %s: %w", env, err)
	}
	path := dir.ManagementKubeconfig()
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return validateBootstrap(ctx, s, src)
	case err != nil:
		return nil, fmt.Errorf("environment %s: %w", env, err)
	}
	m, err := kube.FromKubeconfig("management", data)
	if err != nil {
		return nil, fmt.Errorf("environment %s: its management kubeconfig %s: %w", env, path, err)
	}
	look, err := lookAtManagement(ctx, m, r.underWay)
	switch {
	case err != nil:
		return nil, fmt.Errorf("environment %s: its management cluster (kubeconfig %s): %w", env, path, err)
	case r.underWay && !look.answers:
		return nil, fmt.Errorf("environment %s: the new management cluster of the restore (kubeconfig %s) does not answer: run the restore again once it does", env, path)
	case r.underWay || look.restoredFrom != "":
		r.resumed = true
		if r.resumeFrom == "" {
			r.resumeFrom = look.restoredFrom
		}
		s.out.Log("the management cluster of the restore answers (kubeconfig %s)", path)
	case look.answers:
		return nil, fmt.Errorf("environment %s has a management cluster that answers (kubeconfig %s): a restore is for one that is lost; "+
			"`bootstrap cleanup %s` first if it must go", env, path, env)
	default:
		r.lost = path
		s.out.Log("the management cluster of %s does not answer for %s (kubeconfig %s): it is the one restored", env, lostAfter, path)
	}
	return validateBootstrap(ctx, s, src)
}

// managementLook is what lookAtManagement saw.
type managementLook struct {
	answers bool
	// restoredFrom is the backup of a restore recorded in the cluster (done or under way).
	restoredFrom string
}

// lookAtManagement asks the cluster for its state and a restore's record; a cluster that does not
// answer is asked again for lostAfter (once, when the restore is under way: its caller refuses
// then), and one that answers with an error is an error, never lost.
func lookAtManagement(ctx context.Context, m *kube.Cluster, underWay bool) (managementLook, error) {
	var look managementLook
	err := wait.PollUntilContextTimeout(ctx, 5*time.Second, lostAfter, true, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, _, err := managementstate.Read(ctx, m.Client); err != nil {
			if !notAnswering(err) {
				return false, err
			}
			return underWay, nil
		}
		look.answers = true
		rec, found, err := restore.ReadRecord(ctx, m.Client)
		if err != nil {
			return false, err
		}
		if found {
			look.restoredFrom = rec.Backup
		}
		return true, nil
	})
	// Asked for lostAfter without an answer (and not cancelled): it does not answer.
	if err != nil && !look.answers && wait.Interrupted(err) && ctx.Err() == nil {
		return look, nil
	}
	return look, err
}

// notAnswering: err says the API server was not reached (refused, unreachable, timed out), not
// that it answered with an error.
func notAnswering(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) || utilnet.IsConnectionRefused(err) || errors.Is(err, context.DeadlineExceeded)
}

// readBackup reads the backup from the environment's store and checks it: nothing is created
// before it is known good. A restore under way goes on from its own backup.
func (r *restoring) readBackup(ctx context.Context) error {
	if r.src.git == nil {
		return fmt.Errorf("environment %s: a restore needs a git source (source.url in the values): the tenants' clusters are reconciled from git once restored; nothing was created", r.s.opts.Env.Name)
	}
	v := r.plan.Settings
	if r.opts.StoreEndpoint != "" {
		v.Backup.Store.Endpoint = r.opts.StoreEndpoint
	}
	env := r.s.opts.Env.ClusterName()
	if env == "" {
		return fmt.Errorf("environment %s: its directory's name is no DNS label, and its backups are named after it", r.s.opts.Env.Name)
	}
	store, err := backupjob.OpenStore(v.Backup, v.Credentials.Backup)
	if err != nil {
		return fmt.Errorf("environment %s: %w", r.s.opts.Env.Name, err)
	}
	entries, err := backupjob.List(ctx, store, env)
	if err != nil {
		return err
	}
	from := r.opts.From
	if from == "" {
		// The new cluster may have taken backups of its own since: the restore goes on from
		// the one it began with.
		from = r.resumeFrom
	}
	entry, err := backup.Find(entries, from)
	if err != nil {
		return fmt.Errorf("environment %s, store %s: %w; nothing was created", env, store, err)
	}
	if r.resumeFrom != "" && entry.Key != r.resumeFrom {
		return fmt.Errorf("environment %s is being restored from backup %s, not %s: run the restore again without --from, or with --from %s",
			env, r.resumeFrom, entry.Key, r.resumeFrom)
	}
	r.s.out.Log("reading backup %s (%s, %s, %d bytes)", entry.Key, entry.Created.Format(time.RFC3339), entry.Reason, entry.Size)
	if r.backup, err = backupjob.Fetch(ctx, store, entry, env, r.opts.Identities); err != nil {
		return fmt.Errorf("%w; nothing was created", err)
	}
	r.key = entry.Key
	for _, ns := range r.backup.Namespaces(false) {
		if ns.Skipped != "" {
			r.s.out.Log("the backup left out namespace %s: %s", ns.Name, ns.Skipped)
			continue
		}
		r.s.out.Log("the backup holds namespace %s: %d objects, clusters %v", ns.Name, ns.Objects, ns.Clusters)
	}
	dir := r.s.opts.StateDir.Environment(r.s.opts.Env.Name)
	if r.lost != "" {
		aside := r.lost + ".lost-" + time.Now().UTC().Format("20060102T150405Z")
		if err := os.Rename(r.lost, aside); err != nil {
			return fmt.Errorf("keep the lost cluster's kubeconfig aside: %w", err)
		}
		r.s.out.Log("the lost cluster's kubeconfig is kept as %s", aside)
	}
	// Recorded after the lost kubeconfig is aside: from now on the environment's management
	// kubeconfig, once there, is the new cluster's.
	return atomicfile.Write(dir.RestoreRecord(), []byte(r.key+"\n"), 0o600)
}

// holdAndApply applies the environment and holds the tenants in the bootstrap cluster's state;
// the pivot carries the hold into the management cluster, whose release renders the tenants only
// once self-managed: their directories are suspended from its first render. A bootstrap cluster
// whose pivot began without the hold is refused: it would make the tenants' clusters anew.
func (r *restoring) holdAndApply(ctx context.Context) error {
	if r.src.pivotStarted {
		st, _, err := managementstate.Read(ctx, r.bc.cluster.Client)
		if err != nil {
			return err
		}
		if !st.HoldTenants {
			return fmt.Errorf("the bootstrap cluster's pivot began without the tenants held (a bootstrap, not a restore): `bootstrap cleanup %s` first", r.s.opts.Env.Name)
		}
		return r.environment(ctx)
	}
	if err := r.environment(ctx); err != nil {
		return err
	}
	if err := managementstate.Write(ctx, r.bc.cluster.Client, names.FieldManager+"-restore", managementstate.State{HoldTenants: true}); err != nil {
		return err
	}
	r.s.out.Log("the tenants are held until the backup's clusters are restored")
	return nil
}

// restore takes the backup into the new management cluster and releases the tenants.
func (r *restoring) restore(ctx context.Context) error {
	path := r.s.opts.StateDir.Environment(r.s.opts.Env.Name).ManagementKubeconfig()
	m, err := kube.FromFile("management", path)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "cluster-init-restore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	r.s.result.Management = path
	if r.resumed {
		if err := r.deleteBootstrapCluster(); err != nil {
			return err
		}
	}
	rec, err := restore.Run(ctx, restore.Options{Management: m, Key: r.key, Backup: r.backup, WorkDir: work,
		Log: r.s.out.Log, Waiting: r.s.out.Waiting})
	if err != nil {
		return err
	}
	for ns, why := range rec.Left {
		r.s.out.Log("not restored: namespace %s: %s", ns, why)
	}
	for _, o := range rec.Orphans {
		r.s.out.Log("not managed: %s", o)
	}
	r.s.out.Log("restored %d machines in namespaces %v from %s; the tenants reconcile from git again", len(rec.Machines), rec.Namespaces, rec.Backup)
	// What the lost cluster ran itself is not taken back: its machines are named, removed only
	// when asked.
	for _, mach := range rec.Lost {
		r.s.out.Log("left behind by the lost management cluster (not removed): machine %s, provider ID %s", mach.Name, mach.ProviderID)
	}
	if len(rec.Lost) > 0 {
		r.s.out.Log("bootstrap cleanup %s --lost removes them: the containers of this host, the servers at an OpenStack cloud", r.s.opts.Env.Name)
	}
	if err := os.Remove(r.s.opts.StateDir.Environment(r.s.opts.Env.Name).RestoreRecord()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// deleteBootstrapCluster deletes the kind cluster a restore killed after its finish left: the
// management kubeconfig is only written once the pivot is verified.
func (r *restoring) deleteBootstrapCluster() error {
	name := r.plan.Settings.BootstrapCluster.Name
	kind := kindcluster.New(r.s.opts.StateDir.KindClusters(), func(msg string) { r.s.out.Log("kind: %s", strings.TrimSpace(msg)) })
	exists, err := kind.Exists(name)
	if err != nil || !exists {
		return err
	}
	r.s.out.Log("deleting the bootstrap cluster %s, which a killed restore left", name)
	return kind.Delete(name)
}
