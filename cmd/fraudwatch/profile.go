package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
)

// startCPUProfile profiles the process's CPU into path (run --cpuprofile)
// until stop, which writes the profile out and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("cpu profile: write %s: %w", path, err)
		}
		return nil
	}, nil
}

// profiled ends run's CPU profile: a profile that could not be written
// makes the run fail, since its reader would otherwise find a truncated one.
func profiled(code int, stop func() error, path string, log *slog.Logger) int {
	if err := stop(); err != nil {
		log.Error("the CPU profile was not written", "err", err)
		return exitFailure
	}
	log.Info("CPU profile written", "path", path)
	return code
}
