# Include roots, one per layer target, so that a target sees only its own
# headers and those of the targets it links publicly.
#
# The source tree spells every include from a layer's directory ("common/x.h",
# "collectives/mpi/x.h", "src/x.h", "herd/x.h"), so publishing the repository
# root would let any target include any layer. Instead each layer target
# publishes a directory of its own in the build tree, build/layer_include/<target>,
# holding symbolic links named as the include spelling expects:
#
#   layer_include/herd_common/common        -> <source>/common
#   layer_include/herd_common/herd/types.h  -> <source>/include/herd/types.h
#   layer_include/herd_train/herd/train     -> <source>/include/herd/train
#
# scripts/check_layers.py applies the same rule to the #include lines, so a
# header reached by other means (a relative path) is caught as well.
#
# herd_layer_include(<target> [DIRECTORIES <dir>...] [PUBLIC_HEADERS <path>...])
#   DIRECTORIES     directories of the source tree, each linked under its own
#                   name (common -> "common/...")
#   PUBLIC_HEADERS  files or directories under include/, linked under their
#                   path below include/ (herd/types.h -> "herd/types.h")
# An INTERFACE library publishes the root to its users only; any other target
# to itself and its users.
function(herd_layer_include target)
  cmake_parse_arguments(L "" "" "DIRECTORIES;PUBLIC_HEADERS" ${ARGN})
  set(root ${PROJECT_BINARY_DIR}/layer_include/${target})
  # Links only: REMOVE_RECURSE removes a link, never what it points to.
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root})
  foreach(dir IN LISTS L_DIRECTORIES)
    get_filename_component(name ${dir} NAME)
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${dir} ${root}/${name} SYMBOLIC)
  endforeach()
  foreach(path IN LISTS L_PUBLIC_HEADERS)
    get_filename_component(parent ${root}/${path} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/${path} ${root}/${path} SYMBOLIC)
  endforeach()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE $<BUILD_INTERFACE:${root}>)
  else()
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${root}>)
  endif()
endfunction()
