#include "core/zstd_layout.hpp"

namespace kiln {

ZstdLayout walk_zstd_frame(std::uint64_t size, ByteView first, std::size_t max_blocks,
                           const std::function<std::uint32_t(std::uint64_t)>& block_header) {
  ZstdLayout layout;
  if (first.size < 5 || load_le32(first.data) != 0xFD2FB528u) return layout;  // not a zstd data frame
  // Frame_Header_Descriptor: Frame_Content_Size_flag (bits 7-6), Single_Segment_flag (5),
  // Content_Checksum_flag (2), Dictionary_ID_flag (1-0).
  const std::uint8_t descriptor = first.data[4];
  const unsigned content_size_flag = descriptor >> 6, dictionary_flag = descriptor & 3;
  const bool single_segment = (descriptor >> 5) & 1;
  static constexpr std::size_t kDictionaryIdBytes[4] = {0, 1, 2, 4};
  static constexpr std::size_t kContentSizeBytes[4] = {0, 2, 4, 8};
  layout.header_size = 4 + 1 + (single_segment ? 0 : 1) + kDictionaryIdBytes[dictionary_flag] +
                       (content_size_flag == 0 ? (single_segment ? 1 : 0) : kContentSizeBytes[content_size_flag]);
  layout.checksum = (descriptor >> 2) & 1;
  std::uint64_t at = layout.header_size;
  if (at > size) return layout;
  for (std::size_t blocks = 0;; ++blocks) {
    if (size - at < 3 || blocks == max_blocks) return layout;
    const std::uint32_t header = block_header(at);
    const bool last = header & 1;
    const unsigned type = (header >> 1) & 3;  // raw, RLE, compressed, reserved
    if (type == 3) return layout;
    const std::uint64_t body = type == 1 ? 1 : header >> 3;  // an RLE block stores one byte
    if (body > size - at - 3) return layout;
    at += 3 + body;
    if (last) break;
  }
  if (layout.checksum) {
    if (size - at < 4) return layout;
    at += 4;
  }
  layout.followed = true;
  layout.end = at;
  return layout;
}

}  // namespace kiln
