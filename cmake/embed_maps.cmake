# Writes a C file holding every built-in map, formats/maps/<name>.json, as bytes, with the
# map's name and its inverse's name read from the JSON, and after each map its variants that
# name themselves ("variants": {"local": {"name": ..., "inverse": {"name": ...}}}), loadable
# by those names. Run at build time:
#   cmake -DMAPS_DIR=<formats/maps> -DOUT=<file.c> -P embed_maps.cmake
# A map whose JSON does not parse, or whose "name" is not its file name, fails the build.
if(NOT MAPS_DIR OR NOT OUT)
  message(FATAL_ERROR "embed_maps.cmake needs -DMAPS_DIR=... and -DOUT=...")
endif()

file(GLOB maps ${MAPS_DIR}/*.json)
list(SORT maps)

# CMake's regular expressions have no {n}: spell out one line of 16 bytes.
string(REPEAT "0x[0-9a-f][0-9a-f]," 16 line_of_bytes)

set(arrays "")
set(entries "")
set(count 0)
set(n_entries "0")
foreach(path ${maps})
  get_filename_component(stem ${path} NAME_WLE)
  file(READ ${path} text)
  string(JSON name ERROR_VARIABLE err GET "${text}" name)
  if(err)
    message(FATAL_ERROR "${path}: ${err}")
  endif()
  if(NOT name STREQUAL stem)
    message(FATAL_ERROR "${path}: the map's \"name\" is \"${name}\"; it must be the file name, \"${stem}\"")
  endif()
  # The default matches the parser's: "<name>_inverse".
  string(JSON inverse ERROR_VARIABLE err GET "${text}" inverse name)
  if(err)
    set(inverse "${name}_inverse")
  endif()
  foreach(n "${name}" "${inverse}")
    if(NOT n MATCHES "^[A-Za-z0-9_.-]+$")
      message(FATAL_ERROR "${path}: map name \"${n}\" may hold only letters, digits, '_', '-' and '.'")
    endif()
  endforeach()
  file(READ ${path} hex HEX)
  string(LENGTH "${hex}" hex_len)
  math(EXPR len "${hex_len} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "(${line_of_bytes})" "\\1\n    " bytes "${bytes}")
  string(APPEND arrays "/* ${stem}.json */\nstatic const unsigned char map_${count}[] = {\n    ${bytes}0x00\n};\n\n")
  string(APPEND entries "    { \"${name}\", \"${inverse}\", (const char *)map_${count}, ${len}, NULL },\n")
  set(n_entries "${n_entries} + 1")
  string(JSON n_variants ERROR_VARIABLE err LENGTH "${text}" variants)
  if(err)
    set(n_variants 0)
  endif()
  if(n_variants GREATER 0)
    math(EXPR last "${n_variants} - 1")
    foreach(i RANGE ${last})
      string(JSON variant MEMBER "${text}" variants ${i})
      string(JSON vname ERROR_VARIABLE err GET "${text}" variants ${variant} name)
      if(err)
        continue()
      endif()
      string(JSON vinverse ERROR_VARIABLE err GET "${text}" variants ${variant} inverse name)
      if(err)
        set(vinverse "${vname}_inverse")
      endif()
      foreach(n "${vname}" "${vinverse}" "${variant}")
        if(NOT n MATCHES "^[A-Za-z0-9_.-]+$")
          message(FATAL_ERROR "${path}: variant name \"${n}\" may hold only letters, digits, '_', '-' and '.'")
        endif()
      endforeach()
      string(APPEND entries "    { \"${vname}\", \"${vinverse}\", (const char *)map_${count}, ${len}, \"${variant}\" },\n")
      set(n_entries "${n_entries} + 1")
    endforeach()
  endif()
  math(EXPR count "${count} + 1")
endforeach()

if(count EQUAL 0)
  set(entries "    { NULL, NULL, NULL, 0, NULL },\n")
endif()
math(EXPR n_entries "${n_entries}")

file(WRITE ${OUT}
"/* Generated at build time by cmake/embed_maps.cmake from the maps in formats/maps; do not edit. */
#include \"rules/rules_private.h\"

${arrays}const map_builtin ckpt_rules__builtins[] = {
${entries}};
const size_t ckpt_rules__builtin_n = ${n_entries};
")
