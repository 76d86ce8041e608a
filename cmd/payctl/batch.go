package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/batch"

	"github.com/spf13/cobra"

	"github.com/payreq/payreq/internal/sftpauth"
)

// batchView is one processed (or processing) batch file: its summary, never
// a row's data.
type batchView struct {
	File          string         `json:"file"`
	State         string         `json:"state"`
	Counts        batch.Counts   `json:"counts"`
	ResultFile    string         `json:"resultFile,omitempty"` // as the merchant sees it over SFTP
	Size          int64          `json:"size"`
	ContentSHA256 string         `json:"contentSha256,omitempty"`
	Progress      *batchProgress `json:"progress,omitempty"`
	Invocations   int            `json:"invocations"`
	Error         string         `json:"error,omitempty"`
	UploadedAt    time.Time      `json:"uploadedAt"`
	CompletedAt   *time.Time     `json:"completedAt,omitempty"`
	JobID         string         `json:"jobId"`
}

type batchProgress struct {
	Offset   int64 `json:"offset"`
	NextLine int   `json:"nextLine"`
	Parts    int   `json:"parts"`
}

type batchList struct {
	MerchantID string      `json:"merchantId"`
	Batches    []batchView `json:"batches"`
}

func batchCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:     "batch",
		Short:   "Inspect a merchant's batch files",
		Example: "  payctl --local batch show --id mer_... --file payments.csv",
	}
	var id, file string
	show := &cobra.Command{
		Use:   "show --id ID [--file NAME]",
		Short: "Show batch files: state and counts by outcome (never a row's data)",
		Example: `  payctl --local batch show --id mer_...
  payctl --local batch show --id mer_... --file payments.csv`,
		RunE: jsonCommand(func(ctx context.Context) (any, error) { return batchShow(ctx, *g, &id, &file) }),
	}
	show.Flags().StringVar(&id, "id", "", "merchant id")
	show.Flags().StringVar(&file, "file", "", "only this file name")
	c.AddCommand(show)
	return c
}

func batchShow(ctx context.Context, g globals, id, file *string) (any, error) {
	if *id == "" {
		return nil, usageError("--id is required")
	}
	name := strings.TrimPrefix(*file, sftpauth.IncomingDir+"/")
	e, err := connect(ctx, g)
	if err != nil {
		return nil, err
	}
	if _, err := load(ctx, e, *id); err != nil {
		return nil, err
	}
	jobs, err := e.store.BatchJobs(ctx, *id, name)
	if err != nil {
		return nil, err
	}
	out := batchList{MerchantID: *id, Batches: []batchView{}}
	for _, j := range jobs {
		if name != "" && j.File != name {
			continue // a longer name with the same prefix
		}
		v := batchView{File: j.File, State: j.State, Counts: j.Counts, Size: j.Size, ContentSHA256: j.FileHash,
			Invocations: j.Invocations, Error: j.Error, UploadedAt: j.CreatedAt, CompletedAt: j.CompletedAt, JobID: j.JobID}
		if j.State == batch.JobDone {
			v.ResultFile = sftpauth.ResultsDir + "/" + j.File + ".result.csv"
		} else if !j.Finished() {
			v.Progress = &batchProgress{Offset: j.Offset, NextLine: j.NextLine, Parts: j.Parts}
		}
		out.Batches = append(out.Batches, v)
	}
	sort.SliceStable(out.Batches, func(i, k int) bool { return out.Batches[i].UploadedAt.After(out.Batches[k].UploadedAt) })
	if name != "" && len(out.Batches) == 0 {
		return nil, fmt.Errorf("no batch file %q for merchant %s", name, *id)
	}
	return out, nil
}
