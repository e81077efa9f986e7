package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// KeyPrefix starts every ledgerd API key, so a leaked key is recognisable by secret scanners.
const KeyPrefix = "ldg_"

// ErrBadKey reports an API key that is malformed, unknown or revoked.
var ErrBadKey = errors.New("invalid API key")

// Project is a tenant of ledgerd: everything it stores and shows belongs to exactly one project.
type Project struct {
	ID   int64
	Name string
}

// EnsureProject returns the project with the given name, creating it if needed.
func (s *Store) EnsureProject(ctx context.Context, name string) (Project, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 128 {
		return Project{}, fmt.Errorf("project name must be 1 to 128 characters")
	}
	var p Project
	err := s.Pool.QueryRow(ctx, `INSERT INTO projects (name) VALUES ($1)
		ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id, name`, name).Scan(&p.ID, &p.Name)
	if err != nil {
		return Project{}, fmt.Errorf("create project %q: %w", name, err)
	}
	return p, nil
}

// ProjectByName looks a project up by name.
func (s *Store) ProjectByName(ctx context.Context, name string) (Project, error) {
	var p Project
	err := s.Pool.QueryRow(ctx, `SELECT id, name FROM projects WHERE name = $1`, name).Scan(&p.ID, &p.Name)
	if errors.Is(err, pgx.ErrNoRows) {
		return Project{}, fmt.Errorf("project %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return Project{}, fmt.Errorf("look up project %q: %w", name, err)
	}
	return p, nil
}

// CreateKey makes a new API key for the project (creating the project if needed) and returns it.
// Only its SHA-256 hash is stored: the key cannot be shown again.
func (s *Store) CreateKey(ctx context.Context, project string) (string, error) {
	p, err := s.EnsureProject(ctx, project)
	if err != nil {
		return "", err
	}
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		return "", fmt.Errorf("generate key: %w", err)
	}
	key := KeyPrefix + hex.EncodeToString(secret)
	sum := sha256.Sum256([]byte(key))
	if _, err := s.Pool.Exec(ctx, `INSERT INTO api_keys (project_id, prefix, hash) VALUES ($1, $2, $3)`,
		p.ID, key[:len(KeyPrefix)+6], sum[:]); err != nil {
		return "", fmt.Errorf("store key: %w", err)
	}
	return key, nil
}

// RevokeKey disables a key; requests that present it are refused from then on (after the
// authentication cache's lifetime).
func (s *Store) RevokeKey(ctx context.Context, key string) error {
	sum := sha256.Sum256([]byte(key))
	tag, err := s.Pool.Exec(ctx, `UPDATE api_keys SET revoked_at = now() WHERE hash = $1 AND revoked_at IS NULL`, sum[:])
	if err != nil {
		return fmt.Errorf("revoke key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("revoke key: %w", ErrNotFound)
	}
	return nil
}

// Authenticate returns the project a key belongs to, or ErrBadKey.
func (s *Store) Authenticate(ctx context.Context, key string) (Project, error) {
	if !strings.HasPrefix(key, KeyPrefix) || len(key) > 128 {
		return Project{}, ErrBadKey
	}
	sum := sha256.Sum256([]byte(key))
	var p Project
	err := s.Pool.QueryRow(ctx, `SELECT p.id, p.name FROM api_keys k JOIN projects p ON p.id = k.project_id
		WHERE k.hash = $1 AND k.revoked_at IS NULL`, sum[:]).Scan(&p.ID, &p.Name)
	if errors.Is(err, pgx.ErrNoRows) {
		return Project{}, ErrBadKey
	}
	if err != nil {
		return Project{}, fmt.Errorf("authenticate: %w", err)
	}
	return p, nil
}
