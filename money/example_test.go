package money_test

import (
	"fmt"

	"github.com/ledgerd/ledgerd/money"
)

// Totals print in cents; per-call costs and prices keep four significant digits.
func ExampleNanos_USD() {
	month, _ := money.ParseUSD("2002.439354571")
	call, _ := money.ParseUSD("0.0000378")
	refund, _ := money.ParseUSD("-0.004")
	fmt.Println(month.USD(), call.USD(), refund.USD())
	fmt.Println(month.USDFine(), call.USDFine(), refund.USDFine())
	// Output:
	// $2,002.44 $0.00 $0.00
	// $2,002.44 $0.0000378 -$0.004
}
