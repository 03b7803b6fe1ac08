package verify

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// What an expression can still return when some metric names have no
// series: the question "does this alert go blind without the profiling
// fields, or only judge from fewer of them?" asked of its PromQL.
//
// The answer follows the operators: `a or b` has series when either has,
// `a and b` and `a op b` (arithmetic, comparison) only when both have,
// `a unless b` whenever a has, whatever b; a function or an aggregation
// when its vector arguments have; absent() and absent_over_time() always
// may (they answer for a missing series), and numbers, strings, time(),
// vector() and scalar() always have a value. Label matchers are not looked
// at: a selector has series when its metric name has. A selector without a
// name ({__name__=~"..."}) counts as having series.

// binaryPrec are PromQL's binary operators by precedence, lowest first.
var binaryPrec = map[string]int{
	"or": 1, "and": 2, "unless": 2,
	"==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
	"+": 4, "-": 4, "*": 5, "/": 5, "%": 5, "atan2": 5, "^": 6,
}

// alwaysValued are the calls whose result does not depend on their
// arguments having series.
var alwaysValued = map[string]bool{
	"absent": true, "absent_over_time": true, "time": true, "vector": true, "scalar": true, "pi": true,
}

// numberWords are the numbers PromQL writes as words.
var numberWords = map[string]bool{"Inf": true, "inf": true, "NaN": true, "nan": true}

type reachParser struct {
	toks   []token
	i      int
	served func(name string) bool
}

// canHaveSeries reports whether expr can return series when only the
// metric names served says have series.
func canHaveSeries(expr string, served func(name string) bool) (bool, error) {
	p := &reachParser{toks: lex(expr), served: served}
	ok, err := p.expr(0)
	if err == nil && p.i < len(p.toks) {
		err = p.errorf("unexpected %q", p.toks[p.i].text)
	}
	if err != nil {
		return false, fmt.Errorf("%w in %q", err, expr)
	}
	return ok, nil
}

func (p *reachParser) errorf(format string, args ...any) error {
	return fmt.Errorf("PromQL at token %d: "+format, append([]any{p.i}, args...)...)
}

func (p *reachParser) peek(k int) string {
	if p.i+k < len(p.toks) {
		return p.toks[p.i+k].text
	}
	return ""
}

// adjacent: the token after the next one starts where the next one ends,
// as the two characters of "<=" do.
func (p *reachParser) adjacent() bool {
	return p.i+1 < len(p.toks) && p.toks[p.i+1].pos == p.toks[p.i].pos+1
}

// binaryOp reads the operator at the cursor, if any, without moving it: the
// operator and how many tokens it takes.
func (p *reachParser) binaryOp() (string, int) {
	t := p.peek(0)
	if (t == "=" || t == "!" || t == "<" || t == ">") && p.peek(1) == "=" && p.adjacent() {
		return t + "=", 2
	}
	if _, ok := binaryPrec[t]; ok {
		return t, 1
	}
	return "", 0
}

// expr reads a binary expression whose operators bind at least as tightly
// as minPrec, by precedence climbing.
func (p *reachParser) expr(minPrec int) (bool, error) {
	lhs, err := p.unary()
	if err != nil {
		return false, err
	}
	for {
		op, n := p.binaryOp()
		if op == "" || binaryPrec[op] < minPrec {
			return lhs, nil
		}
		p.i += n
		if err := p.modifiers(); err != nil {
			return false, err
		}
		next := binaryPrec[op] + 1
		if op == "^" { // right-associative
			next = binaryPrec[op]
		}
		rhs, err := p.expr(next)
		if err != nil {
			return false, err
		}
		switch op {
		case "or":
			lhs = lhs || rhs
		case "unless":
		default:
			lhs = lhs && rhs
		}
	}
}

// modifiers skips what may follow a binary operator: bool, on/ignoring
// with their labels, group_left/group_right (and Prometheus 3.10's fill
// modifiers) with their optional labels.
func (p *reachParser) modifiers() error {
	for {
		switch p.peek(0) {
		case "bool":
			p.i++
		case "on", "ignoring":
			p.i++
			if err := p.skipList(); err != nil {
				return err
			}
		case "group_left", "group_right", "fill", "fill_left", "fill_right":
			p.i++
			if p.peek(0) == "(" {
				if err := p.skipList(); err != nil {
					return err
				}
			}
		default:
			return nil
		}
	}
}

// skipList skips a parenthesised list: labels, or a fill value.
func (p *reachParser) skipList() error {
	if p.peek(0) != "(" {
		return p.errorf("expected ( after a modifier, got %q", p.peek(0))
	}
	for p.i < len(p.toks) && p.toks[p.i].text != ")" {
		p.i++
	}
	if p.i == len(p.toks) {
		return p.errorf("unclosed list")
	}
	p.i++
	return nil
}

// skipPast skips up to and including the token close.
func (p *reachParser) skipPast(close string) error {
	for p.i < len(p.toks) && p.toks[p.i].text != close {
		p.i++
	}
	if p.i == len(p.toks) {
		return p.errorf("missing %q", close)
	}
	p.i++
	return nil
}

func (p *reachParser) unary() (bool, error) {
	if t := p.peek(0); t == "-" || t == "+" {
		p.i++
		return p.unary()
	}
	v, err := p.primary()
	if err != nil {
		return false, err
	}
	return v, p.postfix()
}

// postfix skips ranges, subqueries, offsets and @ modifiers.
func (p *reachParser) postfix() error {
	for {
		switch p.peek(0) {
		case "[":
			if err := p.skipPast("]"); err != nil {
				return err
			}
		case "offset":
			p.i++
			if p.peek(0) == "-" {
				p.i++
			}
			p.i++ // the duration
		case "@":
			p.i++
			if t := p.peek(0); (t == "start" || t == "end") && p.peek(1) == "(" {
				p.i += 2
				if err := p.skipPast(")"); err != nil {
					return err
				}
			} else {
				p.i++ // the timestamp
			}
		default:
			return nil
		}
	}
}

func (p *reachParser) primary() (bool, error) {
	t := p.peek(0)
	switch {
	case t == "":
		return false, p.errorf("unexpected end")
	case t == "(":
		p.i++
		v, err := p.expr(0)
		if err != nil {
			return false, err
		}
		if p.peek(0) != ")" {
			return false, p.errorf("expected ), got %q", p.peek(0))
		}
		p.i++
		return v, nil
	case t == "{":
		return true, p.skipPast("}")
	case strings.ContainsAny(t[:1], "\"'`0123456789.") || numberWords[t]:
		// A string, a number, a duration, Inf or NaN.
		p.i++
		return true, nil
	case !isIdent(t) || promqlKeywords[t]:
		return false, p.errorf("unexpected %q", t)
	}
	p.i++
	switch p.peek(0) {
	case "(":
		return p.call(t)
	case "by", "without":
		// An aggregation with its grouping first: sum by (a) (x).
		p.i++
		if err := p.skipList(); err != nil {
			return false, err
		}
		return p.call(t)
	case "{":
		if err := p.skipPast("}"); err != nil {
			return false, err
		}
	}
	return p.served(t), nil
}

// call reads the arguments of a function or an aggregation, and its
// grouping when it follows them.
func (p *reachParser) call(name string) (bool, error) {
	p.i++ // (
	all := true
	for p.peek(0) != ")" {
		v, err := p.expr(0)
		if err != nil {
			return false, err
		}
		all = all && v
		if p.peek(0) == "," {
			p.i++
		} else if p.peek(0) != ")" {
			return false, p.errorf("expected , or ) in the arguments of %s, got %q", name, p.peek(0))
		}
	}
	p.i++
	if g := p.peek(0); g == "by" || g == "without" {
		p.i++
		if err := p.skipList(); err != nil {
			return false, err
		}
	}
	return all || alwaysValued[name], nil
}

func TestCanHaveSeries(t *testing.T) {
	// a and b have series, x and y have none.
	served := func(n string) bool { return n == "a" || n == "b" }
	tests := []struct {
		expr string
		want bool
	}{
		{`a`, true},
		{`x`, false},
		{`a and x`, false},
		{`a unless x`, true},
		{`x unless a`, false},
		{`x or a`, true},
		{`a > 0.5`, true},
		{`a - x offset 1h >= 1024`, false},
		// and binds tighter than or; unless and and are one level, left to right.
		{`a or x and b`, true},
		{`a unless b and x`, false},
		{`x > 1 or a`, true},
		{`(a or x) and b`, true},
		{`count by (h) (a >= 90 or x >= 0.9) == count by (h) (b{c=""})`, true},
		{`count by (h) (a) == count by (h) (x)`, false},
		{`sum without (le) (rate(a[5m] offset 1h)) > bool 0`, true},
		{`avg_over_time(x[10m] offset -1h) >= 0.9 or avg_over_time(a[5m:1m] @ start()) >= 0.9`, true},
		{`a <= 1.2 * (sum by (h) (a) - on (h) group_right () b) / on (h) group_left () (count by (h) (b) - 1)`, true},
		{`a < on (h) group_left () 0.5 * avg by (h) (avg_over_time(x{pod!=""}[10m]))`, false},
		{`time() - x{xid=~"13|31"} < 900`, false},
		{`absent(x{job=~".*gpuscope.*"})`, true},
		{`histogram_quantile(0.5, sum by (pod) (x))`, false},
		{`label_replace(a, "d", "$1", "s", "(.*)") unless on (u) {__name__=~"x.+"}`, true},
		{`-a ^ 2 ^ x`, false},
		{`topk(3, a) * -1`, true},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, err := canHaveSeries(tt.expr, served)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
	for _, bad := range []string{`sum(a`, `a and`, `(a))`, `a b`, `rate(a[5m]`} {
		_, err := canHaveSeries(bad, served)
		require.Error(t, err, bad)
	}
}

// TestShippedRulesParse: the analysis reads every shipped expression, so
// that a construct it does not know fails here and not as a wrong answer.
func TestShippedRulesParse(t *testing.T) {
	for _, f := range ruleFiles(t) {
		groups, err := ruleFileGroups(f)
		require.NoError(t, err)
		for _, g := range groups {
			rules, _ := g["rules"].([]any)
			for _, ru := range rules {
				m, _ := ru.(map[string]any)
				_, err := canHaveSeries(fmt.Sprint(m["expr"]), func(string) bool { return true })
				require.NoError(t, err, "%s: %v%v", f, m["alert"], m["record"])
			}
		}
	}
}
