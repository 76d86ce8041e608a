package main

import (
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionInfo is what `payctl version` prints, from the build information
// the Go toolchain embeds (module version; VCS commit when built from a
// checkout).
type versionInfo struct {
	Module     string `json:"module"`
	Version    string `json:"version"`
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commitTime,omitempty"`
	Modified   bool   `json:"modified,omitempty"` // built from a checkout with uncommitted changes
	Go         string `json:"go"`
}

func buildVersion() versionInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return versionInfo{Version: "unknown"}
	}
	v := versionInfo{Module: bi.Main.Path, Version: bi.Main.Version, Go: bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print payctl's module version and commit",
		Long: `version prints the module path and version, the VCS commit and its time
(when built from a git checkout; "modified" when it had uncommitted changes)
and the Go version, from the build information of the binary.`,
		Example: "  payctl version\n  payctl version | jq -r .commit",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printJSON(cmd.OutOrStdout(), buildVersion())
		},
	}
}
