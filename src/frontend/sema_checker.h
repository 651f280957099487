// The kernel checker's class (private to src/frontend/).
//
// One Checker walks a kernel and fills an Analysis; its methods are spread
// by concern: sema_names.cpp (name resolution, reserved names, the
// specialization's constants), sema_uniformity.cpp (the divergence fixed
// point), sema_stmts.cpp (statements and control flow), sema_exprs.cpp
// (types of expressions and element access), and one file per built-in
// family: sema_calls.cpp (dispatch, argument binding, scalar built-ins),
// sema_shared.cpp (shared allocation and its budget, async copies),
// sema_tile_ops.cpp (tile.load/store/mma/zeros).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/sema.h"
#include "frontend/suggest.h"

namespace tessera::frontend::sema_detail {

// Every built-in callable, by canonical dotted name (without "tessera.").
extern const std::vector<std::string_view> kCallables;
// Names that are values or namespaces.
extern const std::vector<std::string_view> kBuiltinNames;

// "[64, 64]".
std::string sizes_text(const std::vector<std::int64_t>& sizes);

// The items of a tuple expression, or the expression alone.
std::vector<const ast::Expr*> tuple_items(const ast::Expr& e);

struct Var {
  KType type;
  std::size_t def_offset = 0;
  bool is_param = false;
};

// One argument of a built-in call.
struct Arg {
  std::string keyword;  // empty for positional
  const ast::Expr* expr;
  std::size_t offset;
};

class Checker {
 public:
  Checker(const KernelDecl& decl, const Constants& given);

  Analysis run();

 private:
  // ---- diagnostics ----
  [[noreturn]] void fail(std::size_t at, const std::string& message, std::size_t span = 1,
                         ErrorCode code = ErrorCode::KernelType) const {
    raise(code, message, kernel_.locate(at, span));
  }
  [[noreturn]] void fail(const ast::Expr& e, const std::string& message, ErrorCode code = ErrorCode::KernelType) const {
    fail(e.offset, message, e.length, code);
  }
  [[noreturn]] void unknown_keyword(std::size_t offset, const std::string& keyword, const std::string& callee,
                                    const std::string& hint) const;
  std::string line_of(std::size_t offset) const { return std::to_string(kernel_.locate(offset).line); }

  // ---- names (sema_names.cpp) ----
  void check_declaration();
  bool is_reserved(const std::string& name) const;
  bool is_shape_symbol(const std::string& name) const;
  bool is_autotune_name(const std::string& name) const;
  static std::string dotted_name(const ast::Expr& e);
  [[noreturn]] void unknown_name(const ast::Expr& e, const std::string& name) const;
  std::string suggest_callable(const std::string& name) const;
  const ExprInfo& analyze_name(const ast::Expr& e) { return analyze_name_text(e, e.text); }
  const ExprInfo& analyze_name_text(const ast::Expr& e, const std::string& name);
  const ExprInfo& analyze_attribute(const ast::Expr& e);
  const ExprInfo& record_dtype(const ast::Expr& e, DType dtype);

  // ---- uniformity (sema_uniformity.cpp) ----
  void run_pass(bool final_pass);
  void collect_writes(const ast::Body& body);
  void note_call_writes(const ast::Expr& e);
  bool divergent() const { return !divergence_.empty(); }
  void require_uniform_control(const ast::Expr& e, const std::string& what) const;
  bool uniform_load(const KType& buffer, bool uniform_index) const;

  // ---- statements (sema_stmts.cpp) ----
  void check_body(const ast::Body& body, bool top_level);
  void check_stmt(const ast::Stmt& s, bool last_at_top);
  void check_expr_stmt(const ast::Expr& e);
  void check_assign(const ast::Stmt& s);
  void assign_to(const ast::Expr& target, const ast::Expr& value_expr, const ExprInfo& value);
  static std::string buffer_name(const ast::Expr& subscript);
  void store_value(const ast::Expr& value_expr, const ExprInfo& value, DType dtype, const std::string& where);
  void bind(const ast::Expr& target, const ast::Expr& value_expr, const ExprInfo& value);
  void check_aug_assign(const ast::Stmt& s);
  void check_if(const ast::Stmt& s);
  void check_for(const ast::Stmt& s);
  void check_loop_body(const ast::Stmt& s, const std::map<std::string, Var>& before);
  void check_while(const ast::Stmt& s);

  // ---- expressions (sema_exprs.cpp) ----
  void require_bool(const ast::Expr& e, const ExprInfo& info, const std::string& what) const;
  void require_int(const ast::Expr& e, const ExprInfo& info, const std::string& what) const;
  void require_lane(const ast::Expr& e, const ExprInfo& info, const std::string& what) const;
  ExprInfo& record(const ast::Expr& e, ExprInfo info);
  const ExprInfo& analyze(const ast::Expr& e);
  const ExprInfo& analyze_logical(const ast::Expr& e);
  const ExprInfo& analyze_ternary(const ast::Expr& e);
  // The promoted lane type of a binary operation; errors point at the
  // operation's source span (offset, length).
  ExprInfo binary_promote(std::size_t offset, std::size_t length, const ExprInfo& a, const ExprInfo& b) const;
  ExprInfo binary_result(const std::string& op, const ast::Expr& lhs, const ExprInfo& a, const ast::Expr& rhs,
                         const ExprInfo& b, std::size_t offset, std::size_t length) const;
  const ExprInfo& analyze_unary(const ast::Expr& e);
  const ExprInfo& analyze_compare(const ast::Expr& e);
  KType check_element_access(const ast::Expr& e, bool write);
  void check_writable(const ast::Expr& base_expr, const KType& type) const;

  // ---- built-in calls (sema_calls.cpp) ----
  const ExprInfo& analyze_call(const ast::Expr& e);
  std::vector<Arg> bind_args(const ast::Expr& e);
  void expect_args(const ast::Expr& e, const std::string& name, const std::vector<Arg>& args, std::size_t positional,
                   const std::vector<std::string_view>& keywords) const;
  static const Arg* keyword(const std::vector<Arg>& args, std::string_view name);
  std::int64_t const_extent(const ast::Expr& e, const std::string& what);
  const ExprInfo& analyze_cast(const ast::Expr& e, DType to);
  const ExprInfo& analyze_scalar_math(const ast::Expr& e, const std::string& name, const std::vector<Arg>& args);

  // ---- shared memory (sema_shared.cpp) ----
  const ExprInfo& analyze_alloc(const ast::Expr& e);
  const ExprInfo& analyze_cp_async(const ast::Expr& e, const std::vector<Arg>& args);

  // ---- tile operations (sema_tile_ops.cpp) ----
  std::int64_t window(const Arg& a, const std::string& name);
  std::vector<std::int64_t> windows(const ast::Expr& e, const std::string& name, const std::vector<Arg>& args,
                                    const KType& buf, const KType* value);
  static std::string buffer_label(const KType& t) {
    return t.kind == KType::Kind::gmem ? t.param : "the shared buffer";
  }
  void check_index_kw(const Arg& a, const KType& buf, const std::string& name, bool& uniform);
  const ExprInfo& analyze_tile_load(const ast::Expr& e, const std::vector<Arg>& args);
  const ExprInfo& analyze_tile_store(const ast::Expr& e, const std::vector<Arg>& args);
  const ExprInfo& analyze_mma(const ast::Expr& e, const std::vector<Arg>& args);
  const ExprInfo& analyze_transpose(const ast::Expr& e, const std::vector<Arg>& args);
  const ExprInfo& analyze_zeros(const ast::Expr& e, const std::vector<Arg>& args);

  const KernelDecl& decl_;
  const ast::Kernel& kernel_;
  Analysis analysis_;
  std::map<std::string, Var> env_;
  std::map<std::string, std::string> dropped_;  // names defined only in a branch or loop, with why
  std::set<std::string> nonuniform_;
  std::set<std::string> written_;
  std::vector<std::size_t> divergence_;  // offsets of the conditions making control lane-divergent
  std::int64_t shared_total_ = 0;
  bool final_ = false;
};

}  // namespace tessera::frontend::sema_detail
