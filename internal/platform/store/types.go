// Package store keeps the platform's state in the Kubernetes API and nowhere else: custom resources of
// the group devtool.dev (User, AccessToken) in the platform's namespace, and native objects
// (ServiceAccounts, Namespaces, ResourceQuotas, LimitRanges, RoleBindings, TokenRequests). Reads of
// lists come from informers; writes are guarded by resourceVersion, so any replica serves any request.
//
// Kubernetes enforces the isolation: each user has a ServiceAccount u-<name> in the platform's
// namespace; membership of a namespace is a RoleBinding (devtool-member-<user>) of one of the
// ClusterRoles devtool-owner, devtool-editor, devtool-viewer to that ServiceAccount. Changes a user
// makes to a namespace's members are sent impersonating the user's ServiceAccount, so the API server
// decides whether the user may make them. The platform's own rights are used only for what no user
// may do: creating a namespace with its quota, limits and owner binding, deleting a namespace the
// caller owns (checked on the binding first), ServiceAccounts and their tokens, and the CRDs' objects.
package store

import (
	"regexp"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and Version of the platform's custom resources.
const (
	Group   = "devtool.dev"
	Version = "v1alpha1"
)

// The custom resources.
var (
	UserResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "users"}

	TokenResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "accesstokens"}
)

// DefaultNamespace is the platform's own namespace (its ServiceAccounts, users and tokens).
const DefaultNamespace = "devtool-system"

// Labels and names of the objects the platform makes.
const (
	LabelManaged  = "devtool.dev/managed"  // "true" on every namespace the platform created
	LabelPersonal = "devtool.dev/personal" // on a personal namespace: its user
	LabelMember   = "devtool.dev/member"   // on a membership RoleBinding: the user
	LabelRole     = "devtool.dev/role"     // on a membership RoleBinding: owner, editor, viewer
	LabelOwner    = "devtool.dev/owner"    // on an AccessToken: its user
	LabelUser     = "devtool.dev/user"     // on a user's ServiceAccount
	// AnnotationPlatform on a namespace the platform made: the platform's own namespace (which
	// install made it, when two run side by side).
	AnnotationPlatform = "devtool.dev/platform"
	// AnnotationCreatedBy names the user whose request made a namespace: the same user's request
	// repeated (a browser resending a form) finishes the first one instead of being refused.
	AnnotationCreatedBy = "devtool.dev/created-by"

	BindingPrefix = "devtool-member-" // + user: the membership RoleBinding in a namespace
	SAPrefix      = "u-"              // + user: the user's ServiceAccount in the platform's namespace
	RolePrefix    = "devtool-"        // + role: the ClusterRole of a membership
	QuotaName     = "devtool-quota"
	LimitsName    = "devtool-limits"
)

// User is a platform account (custom resource users.devtool.dev, named after the user).
type User struct {
	Name         string
	Admin        bool
	PasswordHash string // argon2id PHC string; "" when password login is off
	Created      time.Time
	FailedLogins int       // failed password logins in a row
	LastFailure  time.Time // of the last failed password login
	LockedUntil  time.Time // password logins refused until then
	// Subject is "<issuer> <sub>" of the OpenID Connect identity the account was made for ("" for a
	// built-in account): only that identity signs in to it through the provider.
	Subject         string
	ResourceVersion string
}

// AccessToken is an API token (custom resource accesstokens.devtool.dev, named after the token's id).
type AccessToken struct {
	ID              string
	Name            string
	Owner           string
	Hash            string // hex SHA-256 of the secret
	Created         time.Time
	Expires         time.Time
	LastUsed        time.Time // zero: never used
	ResourceVersion string
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// reservedUsers cannot be user names: their personal namespace would be a system one, or the
// platform's.
var reservedUsers = map[string]bool{"default": true, "system": true, "devtool-system": true, "local-path-storage": true}

// ValidUserName says why name cannot name a user ("" when it can): a DNS label of 1-40 characters
// (it names the personal namespace and the ServiceAccount u-<name>).
func ValidUserName(name string) string {
	switch {
	case name == "":
		return "required"
	case len(name) > 40:
		return "at most 40 characters"
	case !dnsLabel.MatchString(name):
		return "lower-case letters, digits and '-', starting and ending with a letter or digit"
	case reservedUsers[name] || hasPrefix(name, "kube-") || hasPrefix(name, "devtool-"):
		return "reserved name"
	}
	return ""
}

// ValidNamespaceName says why name cannot name a namespace ("" when it can).
func ValidNamespaceName(name string) string {
	switch {
	case name == "":
		return "required"
	case len(name) > 63:
		return "at most 63 characters"
	case !dnsLabel.MatchString(name):
		return "lower-case letters, digits and '-', starting and ending with a letter or digit"
	case reservedUsers[name] || hasPrefix(name, "kube-") || hasPrefix(name, "devtool-"):
		return "reserved name"
	}
	return ""
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// SAName is the user's ServiceAccount name.
func SAName(user string) string { return SAPrefix + user }

// SAUsername is the Kubernetes user name of a user's ServiceAccount (as impersonated).
func (s *Store) SAUsername(user string) string {
	return "system:serviceaccount:" + s.Namespace + ":" + SAName(user)
}
