package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/gpuscope/gpuscope/counters"
)

// migrateCounters rewrites file into the vocabulary to, onto stdout or
// output, and tells on stderr which lines changed unit (another field ID,
// whose series dashboards and rules must scale) and how many were renamed.
func migrateCounters(stdout, stderr io.Writer, file, to, output string) error {
	voc, err := counters.ParseVocabulary(to)
	if err != nil {
		return fmt.Errorf("counters migrate: --to: %w", err)
	}
	in, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("counters migrate: %w", err)
	}
	defer in.Close()
	var out bytes.Buffer
	renames, err := counters.Migrate(in, &out, voc)
	if err != nil {
		return fmt.Errorf("counters migrate: %s: %w", file, err)
	}
	// The result must load as the original did: a broken file is not
	// written anywhere.
	if _, err := counters.Parse(file+" (migrated)", bytes.NewReader(out.Bytes())); err != nil {
		return fmt.Errorf("counters migrate: the result does not load: %w", err)
	}
	if output == "" {
		if _, err := stdout.Write(out.Bytes()); err != nil {
			return fmt.Errorf("counters migrate: write: %w", err)
		}
	} else if err := os.WriteFile(output, out.Bytes(), 0o644); err != nil {
		return fmt.Errorf("counters migrate: %w", err)
	}
	units := 0
	for _, r := range renames {
		if r.UnitChanges() {
			units++
			fmt.Fprintf(stderr, "%s:%s\n", file, r)
		}
	}
	fmt.Fprintf(stderr, "%s: %d fields renamed to the %s vocabulary, %d of them into another unit\n", file, len(renames), voc, units)
	return nil
}
