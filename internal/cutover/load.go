package cutover

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// Params is what an import needs besides the file.
type Params struct {
	Pool   db.Beginner
	Config *settings.Config
	Client string
	File   string // the file's name, for the errors and the audit
	Format string // FormatJSONLines (the default) or FormatCSV
	By     string // who imports, for the audit
	DryRun bool   // check and report, load nothing
}

// Report says what an import did, or would do in a dry run.
type Report struct {
	Operations int            // the operations the file names
	New        int            // recorded now (in a dry run: that would be)
	Already    int            // recorded before, the same way: left as they are
	Repeated   int            // lines that repeat an earlier line of the file
	ByAction   map[string]int // the new ones, by action
}

// copyRows is how many lines are staged with one COPY: what the import holds in
// memory at a time, whatever the length of the file.
const copyRows = 5000

// ActImport is the audit act of an imported action.
const ActImport = "import"

// errDryRun ends a dry run's transaction: everything it staged is rolled back.
var errDryRun = errors.New("dry run")

// Import records the operations r lists (see Performed, in p.Format) as confirmed
// actions of p.Client, in one transaction. Every line is checked first: against
// the config as it is read, then, staged in import_lines a few thousand at a
// time, against the file's other lines and the actions that exist. A line that
// cannot be imported (malformed, an unknown action or another client's, a
// missing key part or record, a conflict with an existing action or with an
// earlier line: the same operation with another record or other params) makes
// the whole file load nothing (a *Problems error lists them by line). An
// operation recorded before the same way is left as it is, so the same file
// twice changes nothing the second time.
func Import(ctx context.Context, p Params, r io.Reader) (Report, error) {
	rep := Report{ByAction: map[string]int{}}
	if !slices.Contains(p.Config.Clients(), p.Client) {
		return rep, fmt.Errorf("no source of the config belongs to client %q", p.Client)
	}
	src, err := newSource(r, p.Format)
	if err != nil {
		return rep, fmt.Errorf("%s: %w", p.File, err)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return rep, fmt.Errorf("name the import's run: %w", err)
	}
	run := int64(binary.BigEndian.Uint64(b[:]) >> 1)
	problems := &Problems{File: p.File}
	err = db.WithTx(ctx, p.Pool, func(q *db.Queries) error {
		if err := stage(ctx, q, p, run, src, problems); err != nil {
			return err
		}
		if err := checkStaged(ctx, q, p, run, problems, &rep); err != nil {
			return err
		}
		if problems.Count > 0 {
			slices.SortStableFunc(problems.List, func(a, b Problem) int { return a.Line - b.Line })
			return problems
		}
		if p.DryRun {
			return errDryRun
		}
		if rep.New == 0 {
			if err := q.ImportLinesClear(ctx, db.ImportLinesClearParams{Client: p.Client, Run: run}); err != nil {
				return fmt.Errorf("clear the staged lines of %s: %w", p.File, err)
			}
			return nil
		}
		return load(ctx, q, p, run, rep.New)
	})
	if errors.Is(err, errDryRun) {
		err = nil
	}
	return rep, err
}

// stage reads the file and copies each line that holds an operation of the
// client into import_lines, copyRows at a time; the lines that do not are
// problems.
func stage(ctx context.Context, q *db.Queries, p Params, run int64, src source, problems *Problems) error {
	rows := make([]db.ImportLinesCopyParams, 0, copyRows)
	flush := func() error {
		if len(rows) == 0 {
			return nil
		}
		if _, err := q.ImportLinesCopy(ctx, rows); err != nil {
			return fmt.Errorf("stage the lines of %s: %w", p.File, err)
		}
		rows = rows[:0]
		return nil
	}
	for {
		perf, bad, err := src.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", p.File, err)
		}
		if bad != "" {
			problems.add(perf.Line, "%s", bad)
			continue
		}
		op, reason := check(perf, p.Config, p.Client)
		if reason != "" {
			problems.add(perf.Line, "%s", reason)
			continue
		}
		row, err := stagedRow(op, p.Client, run)
		if err != nil {
			return err
		}
		if rows = append(rows, row); len(rows) == copyRows {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// stagedRow is op as a row of import_lines.
func stagedRow(op operation, client string, run int64) (db.ImportLinesCopyParams, error) {
	keyParts, err := json.Marshal(op.Key)
	if err != nil {
		return db.ImportLinesCopyParams{}, fmt.Errorf("encode the key of line %d: %w", op.Line, err)
	}
	return db.ImportLinesCopyParams{Client: client, Run: run, Line: int64(op.Line),
		Environment: op.source.Environment, Source: op.source.Name, Name: op.rule.Name,
		BusinessKey: op.id.BusinessKey(), KeyParts: keyParts, OperationKey: op.id.OperationKey(),
		Destination: op.rule.Destination, Params: op.params, ParamsSha256: op.sum, Owner: op.owner,
		MaxAttempts: int32(op.rule.Retry.Attempts), PerformedAt: op.PerformedAt, ExternalRef: op.ExternalRef,
		Result: op.Result}, nil
}

// checkStaged adds the problems of the staged lines, against each other and the
// actions, and counts what the file would record.
func checkStaged(ctx context.Context, q *db.Queries, p Params, run int64, problems *Problems, rep *Report) error {
	repeating, err := q.ImportLinesRepeating(ctx, db.ImportLinesRepeatingParams{Client: p.Client, Run: run, MaxRows: MaxProblems})
	if err != nil {
		return fmt.Errorf("check the lines of %s against each other: %w", p.File, err)
	}
	for _, r := range repeating {
		problems.add(int(r.Line), "the same operation as line %d (%s %s) with another record or other params",
			r.FirstLine, r.Name, r.BusinessKey)
	}
	conflicts, err := q.ImportLinesAgainstActions(ctx, db.ImportLinesAgainstActionsParams{Client: p.Client, Run: run,
		DoneStates: ledger.PredecessorDoneStates, MaxRows: MaxProblems})
	if err != nil {
		return fmt.Errorf("check the lines of %s against the actions: %w", p.File, err)
	}
	for _, c := range conflicts {
		what := fmt.Sprintf("%s %s exists as action %d (%s", c.Name, c.BusinessKey, c.ActionID, c.State)
		switch {
		case !slices.Contains(ledger.PredecessorDoneStates, c.State):
			problems.add(int(c.Line), "%s): only a done operation can stand for one performed elsewhere; settle it on its page first", what)
		case c.ActionRef != c.ExternalRef:
			problems.add(int(c.Line), "%s, record %q), the line says record %q", what, c.ActionRef, c.ExternalRef)
		default:
			problems.add(int(c.Line), "%s) with other params", what)
		}
	}
	n, err := q.ImportLinesCount(ctx, db.ImportLinesCountParams{Client: p.Client, Run: run})
	if err != nil {
		return fmt.Errorf("count the operations of %s: %w", p.File, err)
	}
	byAction, err := q.ImportLinesFreshByAction(ctx, db.ImportLinesFreshByActionParams{Client: p.Client, Run: run})
	if err != nil {
		return fmt.Errorf("count the new operations of %s: %w", p.File, err)
	}
	rep.Operations, rep.Repeated = int(n.Operations), int(n.Lines-n.Operations)
	rep.Already = int(n.Existing)
	for _, a := range byAction {
		rep.ByAction[a.Name] = int(a.N)
		rep.New += int(a.N)
	}
	return nil
}

// load records the staged operations no action stands for yet, with their audit
// entries, and clears the run's lines, in the caller's transaction. An operation
// an event created since the check makes the whole load fail.
func load(ctx context.Context, q *db.Queries, p Params, run int64, fresh int) error {
	note := fmt.Sprintf("imported from %s by %s", p.File, p.By)
	at := time.Now().UTC().Truncate(time.Microsecond) // as Postgres keeps it, so that it names the rows
	if err := q.ImportLinesLoad(ctx, db.ImportLinesLoadParams{Client: p.Client, Run: run,
		State: ledger.StateConfirmed, Reason: note, ImportedAt: at, File: p.File}); err != nil {
		return fmt.Errorf("record the operations of %s: %w", p.File, err)
	}
	// The audit names each action the load created, and so counts them.
	created, err := q.ImportLinesAudit(ctx, db.ImportLinesAuditParams{Client: p.Client, Run: run, Actor: p.By,
		Act: ActImport, Note: note, File: p.File, ImportedAt: at})
	if err != nil {
		return fmt.Errorf("audit the operations of %s: %w", p.File, err)
	}
	if created != int64(fresh) {
		return fmt.Errorf("%d of the operations of %s were created by events while it was checked; nothing was loaded: run the import again",
			int64(fresh)-created, p.File)
	}
	if err := q.ImportLinesClear(ctx, db.ImportLinesClearParams{Client: p.Client, Run: run}); err != nil {
		return fmt.Errorf("clear the staged lines of %s: %w", p.File, err)
	}
	return nil
}
