package podattr

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	// A pod's segment, the whole of it: pod<uid> (cgroupfs) or
	// <prefix>-pod<uid>.slice (systemd, UID with underscores).
	podSegRe = regexp.MustCompile(`^(?:[a-z]+(?:-[a-z]+)*-)?pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?$`)
	// A QoS class segment between the kubepods root and the pod.
	qosSegRe = regexp.MustCompile(`^(?:burstable|besteffort|(?:[a-z]+-)*kubepods-(?:burstable|besteffort)\.slice)$`)
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
		if o, ok := kubeletCgroup(parts[2]); ok {
			return o, true
		}
	}
	return cgroupOwner{}, false
}

// kubeletCgroup reads a cgroup path the way the kubelet lays it out: the
// first kubepods root, an optional QoS class, the pod, the container right
// below it. Cgroups a container or a user creates below that (a nested
// cgroup, a systemd user scope) can be named anything, another pod's UID
// and container ID included, so the path is read from the root down and
// never matched anywhere in it: a process below a container is that
// container's. A root found under a user's or a unit's delegated subtree
// (user.slice, *.service, *.scope) is not the kubelet's.
func kubeletCgroup(path string) (cgroupOwner, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	// A path seen from another cgroup namespace starts with "..": the
	// kubepods root is then above what can be seen.
	relative := false
	for len(segs) > 0 && segs[0] == ".." {
		segs, relative = segs[1:], true
	}
	i := slices.IndexFunc(segs, func(s string) bool {
		return s == "kubepods" || s == "kubepods.slice" || strings.HasSuffix(s, "-kubepods.slice")
	})
	for _, s := range segs[:max(i, 0)] {
		if s == "user.slice" || strings.HasSuffix(s, ".service") || strings.HasSuffix(s, ".scope") {
			return cgroupOwner{}, false
		}
	}
	switch {
	case i >= 0:
		i++
	case relative:
		i = 0
	default:
		return cgroupOwner{}, false
	}
	if i < len(segs) && qosSegRe.MatchString(segs[i]) {
		i++
	}
	if i >= len(segs) {
		return cgroupOwner{}, false
	}
	m := podSegRe.FindStringSubmatch(segs[i])
	if m == nil {
		return cgroupOwner{}, false
	}
	o := cgroupOwner{PodUID: strings.ReplaceAll(m[1], "_", "-")}
	if i+1 < len(segs) {
		if c := containerSegRe.FindStringSubmatch(segs[i+1]); c != nil {
			o.ContainerID = c[1]
		}
	}
	return o, true
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
