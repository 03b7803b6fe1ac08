//go:build !race

package report

// raceDetector: see race_on_test.go.
const raceDetector = false
