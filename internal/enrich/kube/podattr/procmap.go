package podattr

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Limits on what is read from /proc and the container log directories, so a
// hostile or broken node cannot make the refresh allocate without bound.
const (
	maxCgroupBytes = 64 << 10
	maxLogEntries  = 100000
)

var (
	// pod<uid> in cgroupfs paths (dashes) and systemd slices (underscores).
	podUIDRe = regexp.MustCompile(`pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})`)
	// The container segment: cri-containerd-<id>.scope, crio-<id>.scope,
	// docker-<id>.scope (systemd driver) or a bare <id> (cgroupfs driver).
	containerSegRe = regexp.MustCompile(`^(?:cri-containerd-|crio-|docker-)?([0-9a-f]{64})(?:\.scope)?$`)
)

// cgroupOwner is what a process's cgroup path says about its pod.
type cgroupOwner struct {
	PodUID      string
	ContainerID string
}

// parseCgroup reads the lines of /proc/<pid>/cgroup (v1: one line per
// hierarchy; v2: the single "0::" line) and returns the pod UID and container
// ID of the first kubepods path found.
func parseCgroup(r io.Reader) (cgroupOwner, bool) {
	sc := bufio.NewScanner(io.LimitReader(r, maxCgroupBytes))
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		path := parts[2]
		if !strings.Contains(path, "kubepods") {
			continue
		}
		m := podUIDRe.FindStringSubmatch(path)
		if m == nil {
			continue
		}
		o := cgroupOwner{PodUID: strings.ReplaceAll(m[1], "_", "-")}
		if seg := containerSegRe.FindStringSubmatch(filepath.Base(path)); seg != nil {
			o.ContainerID = seg[1]
		}
		return o, true
	}
	return cgroupOwner{}, false
}

// cgroupOfPID reads /proc/<pid>/cgroup under procRoot.
func cgroupOfPID(procRoot string, pid uint32) (cgroupOwner, error) {
	p := filepath.Join(procRoot, strconv.FormatUint(uint64(pid), 10), "cgroup")
	f, err := os.Open(p)
	if err != nil {
		return cgroupOwner{}, fmt.Errorf("read cgroup of PID %d: %w", pid, err)
	}
	defer f.Close()
	o, ok := parseCgroup(f)
	if !ok {
		return cgroupOwner{}, fmt.Errorf("%s: no kubepods cgroup (not a pod process)", p)
	}
	return o, nil
}

// podRef names a pod (and, where known, one of its containers).
type podRef struct {
	Namespace, Pod, Container string
}

// logIndex maps container IDs and pod UIDs to pod names, read from the
// kubelet's log directories. Their names are a stable kubelet layout:
//
//	<root>/containers/<pod>_<namespace>_<container>-<container ID>.log
//	<root>/pods/<namespace>_<pod>_<pod UID>/
//
// and need neither the API server nor RBAC. Pod, namespace and container
// names cannot contain '_', so the split is unambiguous.
type logIndex struct {
	byContainerID map[string]podRef
	byPodUID      map[string]podRef
	uidByPod      map[string]string // namespace/pod -> UID
}

func readLogIndex(root string) (*logIndex, error) {
	idx := &logIndex{
		byContainerID: map[string]podRef{},
		byPodUID:      map[string]podRef{},
		uidByPod:      map[string]string{},
	}
	var firstErr error
	names, err := readDirNames(filepath.Join(root, "containers"))
	if err != nil {
		firstErr = err
	}
	for _, n := range names {
		base, ok := strings.CutSuffix(n, ".log")
		if !ok {
			continue
		}
		dash := strings.LastIndexByte(base, '-')
		if dash < 0 {
			continue
		}
		id := base[dash+1:]
		f := strings.Split(base[:dash], "_")
		if len(id) != 64 || len(f) != 3 {
			continue
		}
		idx.byContainerID[id] = podRef{Pod: f[0], Namespace: f[1], Container: f[2]}
	}
	names, err = readDirNames(filepath.Join(root, "pods"))
	if err != nil && firstErr == nil {
		firstErr = err
	}
	for _, n := range names {
		f := strings.Split(n, "_")
		if len(f) != 3 {
			continue
		}
		idx.byPodUID[f[2]] = podRef{Namespace: f[0], Pod: f[1]}
		idx.uidByPod[f[0]+"/"+f[1]] = f[2]
	}
	return idx, firstErr
}

// readDirNames lists at most maxLogEntries names of dir.
func readDirNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("container log directory: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(maxLogEntries)
	if err != nil && err != io.EOF {
		return names, fmt.Errorf("list %s: %w", dir, err)
	}
	return names, nil
}
