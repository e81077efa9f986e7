package grafana

//go:generate go run ./gen -out dashboards
