// Operand checks shared by the Tile IR op families (tile_support.h).
#include "tile/tile_support.h"

#include "tessera/support/error.h"

namespace tessera::tile {

using ir::Type;
using ir::TypeKind;

bool is_integer(DType dtype) {
  return !is_float(dtype) && dtype != DType::bool_;
}

std::string operand_label(std::string_view op, std::string_view operand) {
  return "operand '" + std::string(operand) + "' of " + std::string(op);
}

void require_kind(const Type& t, TypeKind kind, std::string_view op, std::string_view operand) {
  if (t.kind != kind) {
    raise(ErrorCode::DtypeUnsupported, operand_label(op, operand) + " must be a " +
                                           std::string(ir::type_kind_name(kind)) + " value, got " + ir::print_type(t));
  }
}

void require_index(const Type& t, std::string_view op, std::string_view operand) {
  require_kind(t, TypeKind::lane, op, operand);
  if (!is_integer(t.dtype())) {
    raise(ErrorCode::DtypeUnsupported,
          operand_label(op, operand) + " must be an integer lane value, got " + ir::print_type(t));
  }
}

void require_buffer(const Type& t, std::string_view op, std::string_view operand) {
  if (!t.is_buffer()) {
    raise(ErrorCode::DtypeUnsupported,
          operand_label(op, operand) + " must be a gmem or smem buffer, got " + ir::print_type(t));
  }
}

void require_writable_buffer(const Type& t, std::string_view op, std::string_view operand) {
  require_buffer(t, op, operand);
  if (t.is_gmem() && !t.mut) {
    raise(ErrorCode::Privilege, std::string(op) + " writes buffer " + ir::print_type(t) + ", which is not marked mut");
  }
}

void require_bool_lane(const Type& t, std::string_view op, std::string_view operand) {
  if (!t.is_lane() || t.dtype() != DType::bool_) {
    raise(ErrorCode::DtypeUnsupported, operand_label(op, operand) + " must be lane<bool>, got " + ir::print_type(t));
  }
}

void require_same(const Type& a, const Type& b, std::string_view op, std::string_view what) {
  if (a != b) {
    raise(ErrorCode::DtypeUnsupported, std::string(op) + ": " + std::string(what) + " must have the same type, got " +
                                           ir::print_type(a) + " and " + ir::print_type(b));
  }
}

bool dims_agree(const ir::Dim& a, const ir::Dim& b) {
  return a == b;
}

void require_regions(const ir::Operation& op, std::size_t regions) {
  if (op.num_regions() != regions) {
    raise(ErrorCode::VerifyFailed,
          "needs " + std::to_string(regions) + " region(s), has " + std::to_string(op.num_regions()));
  }
  for (std::size_t r = 0; r < regions; ++r) {
    if (op.region(r).num_blocks() != 1) {
      raise(ErrorCode::VerifyFailed, "region #" + std::to_string(r) + " must hold exactly one block, holds " +
                                         std::to_string(op.region(r).num_blocks()));
    }
  }
}

void require_block_args(const ir::Block& block, std::span<const Type> types, std::string_view what) {
  if (block.num_arguments() != types.size()) {
    raise(ErrorCode::VerifyFailed, std::string(what) + " takes " + std::to_string(block.num_arguments()) +
                                       " block argument(s); expected " + std::to_string(types.size()));
  }
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (block.argument(i)->type() != types[i]) {
      raise(ErrorCode::VerifyFailed, std::string(what) + " block argument #" + std::to_string(i) + " has type " +
                                         ir::print_type(block.argument(i)->type()) + "; expected " +
                                         ir::print_type(types[i]));
    }
  }
}

void require_terminator(const ir::Block& block, std::string_view terminator, std::size_t first,
                        std::span<const Type> types, std::string_view what) {
  const ir::Operation* term = block.terminator();
  if (!term || term->name() != terminator) {
    raise(ErrorCode::VerifyFailed,
          std::string(what) + " must end with '" + std::string(terminator) + "'" +
              (term ? " (it ends with '" + std::string(term->name()) + "')" : " (it is empty)"));
  }
  std::size_t given = term->num_operands() >= first ? term->num_operands() - first : 0;
  if (given != types.size()) {
    raise(ErrorCode::VerifyFailed, "'" + std::string(terminator) + "' of " + std::string(what) + " gives " +
                                       std::to_string(given) + " value(s); expected " + std::to_string(types.size()));
  }
  for (std::size_t i = 0; i < types.size(); ++i) {
    const ir::Value* v = term->operand(first + i);
    if (v && v->type() != types[i]) {
      raise(ErrorCode::VerifyFailed, "'" + std::string(terminator) + "' of " + std::string(what) + " value #" +
                                         std::to_string(i) + " has type " + ir::print_type(v->type()) + "; expected " +
                                         ir::print_type(types[i]));
    }
  }
}

std::vector<Type> types_of(std::span<const Type> types, std::size_t from) {
  return from >= types.size() ? std::vector<Type>{} : std::vector<Type>(types.begin() + from, types.end());
}

}  // namespace tessera::tile
