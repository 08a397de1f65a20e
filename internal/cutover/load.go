package cutover

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
)

// Params is what an import needs besides the file.
type Params struct {
	Pool   db.Beginner
	Config *ledger.Config
	Client string
	File   string // the file's name, for the errors and the audit
	By     string // who imports, for the audit
	DryRun bool   // check and report, load nothing
}

// Report says what an import did, or would do in a dry run.
type Report struct {
	Operations int            // the operations the file lists
	New        int            // recorded now (in a dry run: that would be)
	Already    int            // recorded before, the same way: left as they are
	Repeated   int            // lines that repeat an earlier line of the file
	ByAction   map[string]int // the new ones, by action
}

// chunk is how many operations one statement or one batch carries.
const chunk = 1000

// ActImport is the audit act of an imported action.
const ActImport = "import"

// Import records the operations r lists (JSON lines, see Performed) as confirmed
// actions of p.Client, in one transaction: every line is checked first, against
// the config and against the actions that exist, and one that cannot be
// imported (an unknown action, a missing key part, a conflict with an existing
// action: the same operation with another record or other params) makes the
// whole file load nothing (a *Problems error lists each with its line). An
// operation recorded before the same way is left as it is, so the same file
// twice changes nothing the second time.
func Import(ctx context.Context, p Params, r io.Reader) (Report, error) {
	rep := Report{ByAction: map[string]int{}}
	if !slices.Contains(p.Config.Clients(), p.Client) {
		return rep, fmt.Errorf("no source of the config belongs to client %q", p.Client)
	}
	problems := &Problems{File: p.File}
	ops, err := readLines(r, p.Config, p.Client, problems)
	if err != nil {
		return rep, err
	}
	ops, rep.Repeated = dedupe(ops, problems)
	rep.Operations = len(ops)
	fresh, err := againstLedger(ctx, p, ops, problems)
	if err != nil {
		return rep, err
	}
	if len(problems.List) > 0 {
		slices.SortStableFunc(problems.List, func(a, b Problem) int { return a.Line - b.Line })
		return rep, problems
	}
	rep.Already = len(ops) - len(fresh)
	for _, op := range fresh {
		rep.ByAction[op.rule.Name]++
	}
	rep.New = len(fresh)
	if p.DryRun || len(fresh) == 0 {
		return rep, nil
	}
	return rep, db.WithTx(ctx, p.Pool, func(q *db.Queries) error { return load(ctx, q, p, fresh) })
}

// dedupe keeps the first line of each operation: a later line that says the
// same is counted, one that says otherwise is a problem.
func dedupe(ops []operation, problems *Problems) ([]operation, int) {
	first := map[string]int{}
	var out []operation
	repeated := 0
	for _, op := range ops {
		key := op.id.OperationKey()
		i, seen := first[key]
		if !seen {
			first[key] = len(out)
			out = append(out, op)
			continue
		}
		was := out[i]
		if was.ExternalRef != op.ExternalRef || !bytes.Equal(was.sum, op.sum) {
			problems.add(op.Line, "the same operation as line %d (%s %s) with another record or other params",
				was.Line, op.rule.Name, op.id.BusinessKey())
			continue
		}
		repeated++
	}
	return out, repeated
}

// againstLedger returns the operations not recorded yet, and adds a problem for
// each that exists otherwise than the line says.
func againstLedger(ctx context.Context, p Params, ops []operation, problems *Problems) ([]operation, error) {
	var fresh []operation
	err := db.WithTx(ctx, p.Pool, func(q *db.Queries) error {
		for from := 0; from < len(ops); from += chunk {
			part := ops[from:min(from+chunk, len(ops))]
			keys := make([]string, len(part))
			for i, op := range part {
				keys[i] = op.id.OperationKey()
			}
			rows, err := q.ActionsByOperationKey(ctx, db.ActionsByOperationKeyParams{Client: p.Client, OperationKeys: keys})
			if err != nil {
				return fmt.Errorf("read the actions of the file's operations: %w", err)
			}
			existing := make(map[string]db.ActionsByOperationKeyRow, len(rows))
			for _, r := range rows {
				existing[r.OperationKey] = r
			}
			for i, op := range part {
				a, ok := existing[keys[i]]
				if !ok {
					fresh = append(fresh, op)
					continue
				}
				if reason := conflict(op, a); reason != "" {
					problems.add(op.Line, "%s", reason)
				}
			}
		}
		return nil
	})
	return fresh, err
}

// conflict is why the existing action a cannot stand for op, or "" when it
// already does: done (confirmed, or resolved by a person), with the same record
// and, where both are known, the same params.
func conflict(op operation, a db.ActionsByOperationKeyRow) string {
	what := fmt.Sprintf("%s %s exists as action %d (%s", op.rule.Name, op.id.BusinessKey(), a.ID, a.State)
	switch {
	case !slices.Contains(ledger.PredecessorDoneStates, a.State):
		return what + "): only a done operation can stand for one performed elsewhere; settle it on its page first"
	case a.ExternalRef != op.ExternalRef:
		return fmt.Sprintf("%s, record %q), the line says record %q", what, a.ExternalRef, op.ExternalRef)
	case len(op.sum) > 0 && len(a.ParamsSha256) > 0 && !bytes.Equal(op.sum, a.ParamsSha256):
		return what + ") with other params"
	}
	return ""
}

// load writes the fresh operations and their audit entries, a batch at a time,
// in the caller's transaction. An operation an event created since the check
// makes the whole load fail: run the import again to see it.
func load(ctx context.Context, q *db.Queries, p Params, fresh []operation) error {
	reason := fmt.Sprintf("imported from %s by %s", p.File, p.By)
	for from := 0; from < len(fresh); from += chunk {
		part := fresh[from:min(from+chunk, len(fresh))]
		rows := make([]db.ActionImportOneParams, len(part))
		for i, op := range part {
			keyParts, err := json.Marshal(op.Key)
			if err != nil {
				return fmt.Errorf("encode the key of line %d: %w", op.Line, err)
			}
			rows[i] = db.ActionImportOneParams{Client: p.Client, Environment: op.source.Environment,
				Source: op.source.Name, Name: op.rule.Name, BusinessKey: op.id.BusinessKey(), KeyParts: keyParts,
				OperationKey: op.id.OperationKey(), Destination: op.rule.Destination, Params: op.params,
				ParamsSha256: op.sum, State: ledger.StateConfirmed, Reason: reason, Owner: op.owner,
				MaxAttempts: int32(op.rule.Retry.Attempts), PerformedAt: op.PerformedAt, ExternalRef: op.ExternalRef,
				Result: op.Result}
		}
		ids := map[string]int64{}
		var first error
		q.ActionImportOne(ctx, rows).Query(func(_ int, created []db.ActionImportOneRow, err error) {
			if first == nil {
				first = err
			}
			for _, c := range created {
				ids[c.OperationKey] = c.ID
			}
		})
		if first != nil {
			return fmt.Errorf("record the imported operations: %w", first)
		}
		if len(ids) != len(part) {
			return fmt.Errorf("%d of the file's operations were created by events while it was checked; nothing was loaded: run the import again",
				len(part)-len(ids))
		}
		audit := make([]db.AuditInsertEachParams, len(part))
		for i, op := range part {
			detail, err := json.Marshal(map[string]any{"file": p.File, "line": op.Line, "performed_at": op.PerformedAt})
			if err != nil {
				return fmt.Errorf("encode the audit of line %d: %w", op.Line, err)
			}
			audit[i] = db.AuditInsertEachParams{Client: p.Client, ActionID: ids[rows[i].OperationKey], Actor: p.By,
				Act: ActImport, Note: reason, Detail: detail}
		}
		q.AuditInsertEach(ctx, audit).Exec(func(_ int, err error) {
			if first == nil {
				first = err
			}
		})
		if first != nil {
			return fmt.Errorf("audit the imported operations: %w", first)
		}
	}
	return nil
}
