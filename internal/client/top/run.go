package top

import (
	"context"
	"io"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

// Run shows the view of the server c reads until the user quits or ctx
// ends.
func Run(ctx context.Context, c *sampleapi.Client, in io.Reader, out io.Writer) error {
	m := New(c.Base, nil)
	opts := []tea.ProgramOption{tea.WithAltScreen(), tea.WithContext(ctx)}
	if in != nil {
		opts = append(opts, tea.WithInput(in))
	}
	if out != nil {
		opts = append(opts, tea.WithOutput(out))
	}
	p := tea.NewProgram(m, opts...)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go Feed(fctx, c, p.Send)
	_, err := p.Run()
	if err == tea.ErrProgramKilled && ctx.Err() != nil {
		return nil
	}
	return err
}
