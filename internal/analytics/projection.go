package analytics

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerd/ledgerd/money"
)

// BasisDays is how many complete days before today the run rate averages.
const BasisDays = 7

// Projection is a month's spend so far and where it is heading. For a month in progress:
//
//   - month_to_date_usd is the cost of every attempt of the month so far, today's included.
//   - run_rate_usd is the mean daily cost of the last BasisDays complete days before today (across
//     the month boundary, but never before the first day the project, or service, had any
//     attempt); run_rate_stddev_usd is their sample standard deviation. With no complete day yet,
//     the rate is today's cost scaled up to a whole day and the deviation 0.
//   - days_remaining is the rest of today (as a fraction of its length) plus the whole days left.
//   - projected_usd = month_to_date + run_rate × days_remaining; projected_low_usd and
//     projected_high_usd use run_rate ∓ one standard deviation (the low rate floored at 0).
//   - budget_crossed_on is the local day the cumulative spend reached the monthly budget, or, if
//     it has not yet, the day the projection reaches it at the run rate; nil if neither happens
//     within the month.
//
// A month that is over is complete: projected, low and high all equal its actual total, and the run
// rate is its mean daily cost. Amounts are exact nano-dollars: means and the projection are rounded
// half away from zero, the deviation down. Unpriced attempts add nothing (unpriced_attempts says
// how many there were this month).
type Projection struct {
	Month            string      `json:"month"`
	Timezone         string      `json:"timezone"`
	Service          string      `json:"service,omitempty"`
	Complete         bool        `json:"complete"`
	MonthToDateUSD   money.Nanos `json:"month_to_date_usd"`
	TodayUSD         money.Nanos `json:"today_usd"`
	ProjectedUSD     money.Nanos `json:"projected_usd"`
	ProjectedLowUSD  money.Nanos `json:"projected_low_usd"`
	ProjectedHighUSD money.Nanos `json:"projected_high_usd"`
	RunRateUSD       money.Nanos `json:"run_rate_usd"`
	RunRateStddevUSD money.Nanos `json:"run_rate_stddev_usd"`
	BasisDays        int         `json:"basis_days"`
	DaysInMonth      int         `json:"days_in_month"`
	DaysElapsed      float64     `json:"days_elapsed"`
	DaysRemaining    float64     `json:"days_remaining"`
	UnpricedAttempts int64       `json:"unpriced_attempts"`
	// UsageUnknownAttempts are the month's attempts whose answer carried no usage: like unpriced
	// ones, their cost is missing from every amount, never counted as $0.
	UsageUnknownAttempts int64        `json:"usage_unknown_attempts"`
	BudgetUSD            *money.Nanos `json:"budget_usd"`
	BudgetExceeded       bool         `json:"budget_exceeded"`
	BudgetCrossedOn      *string      `json:"budget_crossed_on"`
	Days                 []DayCost    `json:"days"`
}

// DayCost is the cost of one local day of the month, up to today.
type DayCost struct {
	Day     string      `json:"day"`
	CostUSD money.Nanos `json:"cost_usd"`
}

// dailyCostSQL is the cost per local day of [@from, @to), for one service when @service is not empty.
const dailyCostSQL = `SELECT d.bucket, sum8(d.cost_nanos), sum8(d.unpriced_attempts), sum8(d.usage_unknown_attempts)
	FROM rollup_daily d
	WHERE d.project_id = @project AND d.bucket >= @from AND d.bucket < @to
		AND (@service = '' OR d.series_id IN (SELECT id FROM series WHERE project_id = @project AND service = @service))
	GROUP BY d.bucket`

// firstDaySQL is the first local day with any attempt (of @service when it is not empty).
const firstDaySQL = `SELECT d.bucket FROM rollup_daily d
	WHERE d.project_id = @project
		AND (@service = '' OR d.series_id IN (SELECT id FROM series WHERE project_id = @project AND service = @service))
	ORDER BY d.bucket LIMIT 1`

// Projection reports the spend of a month (the year and month of month as it reads in its own
// location; days counted in the Service's timezone) for a project, or one service of it.
func (s *Service) Projection(ctx context.Context, projectID int64, month time.Time, service string) (Projection, error) {
	y, m, _ := month.Date()
	first := date{y, m, 1}
	next := first.addDays(32)
	next = date{next.y, next.m, 1}
	now := s.now()
	today := dateOf(now, s.tz)
	if today.before(first) {
		return Projection{}, badParam("month", "%04d-%02d has not begun", y, m)
	}
	p := Projection{Month: fmt.Sprintf("%04d-%02d", y, m), Timezone: s.tz.String(), Service: service,
		DaysInMonth: daysBetween(first, next), Complete: !today.before(next), Days: []DayCost{}}

	lo := first
	if basis := today.addDays(-BasisDays); basis.before(lo) {
		lo = basis
	}
	costs := map[date]int64{}
	var (
		day                     time.Time
		cost, unpriced, unknown int64
	)
	if err := s.read(ctx, dailyCostSQL, pgx.NamedArgs{"project": projectID, "from": lo.civil(), "to": next.civil(), "service": service},
		[]any{&day, &cost, &unpriced, &unknown}, func() error {
			d := date{day.Year(), day.Month(), day.Day()}
			costs[d] = cost
			if !d.before(first) {
				p.MonthToDateUSD += money.Nanos(cost)
				p.UnpricedAttempts += unpriced - unknown
				p.UsageUnknownAttempts += unknown
			}
			return nil
		}); err != nil {
		return Projection{}, fmt.Errorf("projection: %w", err)
	}
	var err error
	if p.BudgetUSD, err = s.store.Budget(ctx, projectID); err != nil {
		return Projection{}, err
	}

	last := today // the last day shown: today, or the month's last day
	if p.Complete {
		last = next.addDays(-1)
	}
	var cum money.Nanos
	for d := first; !last.before(d); d = d.addDays(1) {
		c := money.Nanos(costs[d])
		p.Days = append(p.Days, DayCost{Day: d.String(), CostUSD: c})
		cum += c
		if p.BudgetUSD != nil && !p.BudgetExceeded && cum >= *p.BudgetUSD {
			p.BudgetExceeded = true
			on := d.String()
			p.BudgetCrossedOn = &on
		}
	}

	if p.Complete {
		var basis []int64
		for d := first; d.before(next); d = d.addDays(1) {
			basis = append(basis, costs[d])
		}
		p.RunRateUSD, p.RunRateStddevUSD = meanStddev(basis)
		p.BasisDays = len(basis)
		p.ProjectedUSD, p.ProjectedLowUSD, p.ProjectedHighUSD = p.MonthToDateUSD, p.MonthToDateUSD, p.MonthToDateUSD
		p.DaysElapsed = float64(p.DaysInMonth)
		return p, nil
	}

	// Today's elapsed and remaining parts, as fractions of its length.
	start, end := today.start(s.tz), today.addDays(1).start(s.tz)
	dayLen, left := end.Sub(start), end.Sub(now)
	fullLeft := daysBetween(today.addDays(1), next)
	remaining := new(big.Rat).Add(big.NewRat(int64(fullLeft), 1), big.NewRat(int64(left), int64(dayLen)))
	p.DaysRemaining, _ = remaining.Float64()
	p.DaysElapsed = float64(p.DaysInMonth) - p.DaysRemaining
	p.TodayUSD = money.Nanos(costs[today])

	// The basis: the complete days before today, at most BasisDays, none before the first day
	// with any attempt (days before a service existed are not days it spent nothing).
	basisFrom := today.addDays(-BasisDays)
	var firstDay time.Time
	switch err := s.queryRow(ctx, firstDaySQL, pgx.NamedArgs{"project": projectID, "service": service}, &firstDay); {
	case errors.Is(err, pgx.ErrNoRows):
		basisFrom = today
	case err != nil:
		return Projection{}, fmt.Errorf("projection: %w", err)
	default:
		if fd := (date{firstDay.Year(), firstDay.Month(), firstDay.Day()}); basisFrom.before(fd) {
			basisFrom = fd
		}
	}
	var basis []int64
	for d := basisFrom; d.before(today); d = d.addDays(1) {
		basis = append(basis, costs[d])
	}
	p.BasisDays = len(basis)
	if len(basis) > 0 {
		p.RunRateUSD, p.RunRateStddevUSD = meanStddev(basis)
	} else if elapsed := now.Sub(start); elapsed > 0 {
		p.RunRateUSD = roundNanos(new(big.Rat).SetFrac(
			new(big.Int).Mul(big.NewInt(costs[today]), big.NewInt(int64(dayLen))), big.NewInt(int64(elapsed))))
	}
	at := func(rate money.Nanos) money.Nanos {
		return p.MonthToDateUSD + roundNanos(new(big.Rat).Mul(big.NewRat(int64(rate), 1), remaining))
	}
	p.ProjectedUSD = at(p.RunRateUSD)
	p.ProjectedLowUSD = at(max(0, p.RunRateUSD-p.RunRateStddevUSD))
	p.ProjectedHighUSD = at(p.RunRateUSD + p.RunRateStddevUSD)

	if p.BudgetUSD != nil && !p.BudgetExceeded && p.RunRateUSD > 0 {
		if d, ok := crossing(*p.BudgetUSD-p.MonthToDateUSD, p.RunRateUSD, big.NewRat(int64(left), int64(dayLen))); ok {
			if on := today.addDays(d); on.before(next) {
				str := on.String()
				p.BudgetCrossedOn = &str
			}
		}
	}
	return p, nil
}

// crossing is in how many days from today spending rate per day crosses need, given that todayLeft
// of today remains: 0 if within today.
func crossing(need, rate money.Nanos, todayLeft *big.Rat) (int, bool) {
	if need <= 0 || rate <= 0 {
		return 0, false
	}
	restOfToday := new(big.Rat).Mul(big.NewRat(int64(rate), 1), todayLeft)
	needRat := big.NewRat(int64(need), 1)
	if needRat.Cmp(restOfToday) <= 0 {
		return 0, true
	}
	after := new(big.Rat).Sub(needRat, restOfToday)
	after.Quo(after, big.NewRat(int64(rate), 1))
	q, r := new(big.Int).QuoRem(after.Num(), after.Denom(), new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() || q.Int64() > 400 {
		return 0, false
	}
	return int(q.Int64()), true
}

// meanStddev is the mean (rounded half away from zero) and sample standard deviation (rounded
// down; 0 for fewer than two values) of daily costs, computed exactly.
func meanStddev(v []int64) (money.Nanos, money.Nanos) {
	n := int64(len(v))
	if n == 0 {
		return 0, 0
	}
	sum, sq := new(big.Int), new(big.Int)
	for _, x := range v {
		bx := big.NewInt(x)
		sum.Add(sum, bx)
		sq.Add(sq, new(big.Int).Mul(bx, bx))
	}
	mean := roundNanos(new(big.Rat).SetFrac(sum, big.NewInt(n)))
	if n < 2 {
		return mean, 0
	}
	// variance = (n·Σx² − (Σx)²) / (n(n−1))
	num := new(big.Int).Sub(new(big.Int).Mul(big.NewInt(n), sq), new(big.Int).Mul(sum, sum))
	variance := num.Quo(num, big.NewInt(n*(n-1)))
	return mean, money.Nanos(variance.Sqrt(variance).Int64())
}

func roundNanos(r *big.Rat) money.Nanos { return money.Nanos(money.RoundRat(r).Int64()) }
