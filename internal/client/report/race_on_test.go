//go:build race

package report

// raceDetector: the race detector instruments allocations, so a bound on
// bytes allocated per byte is looser under it.
const raceDetector = true
