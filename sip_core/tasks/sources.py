"""The pinned external files: where each comes from and its SHA-256 (copied from the data provenance notes).

Names are ``<collection>/<file>``; the same relative layout is used by mirrors, by ``sip data fetch --out``
and by ``--raw`` of ``sip data g2p|sygus``. Kept in code (not read from a mirror) so that a mirror can
never vouch for itself.
"""
from __future__ import annotations

from dataclasses import dataclass

# Public raw-file URL of each collection at its pinned commit; a file's URL is BASE + "/" + file.
COLLECTIONS = {
    "wikipron": "https://raw.githubusercontent.com/CUNY-CL/wikipron/"
                "185dfcf514fe37fe4cfddddeacff1eda3afdca55/data/scrape/tsv",
    "sygus_pbe_strings_2017": "https://raw.githubusercontent.com/SyGuS-Org/benchmarks/"
                              "13c8deb68a873635879c9a69bc78caebd340f646/comp/2017/PBE_Strings_Track",
}

# `sha256sum` format, so it can be diffed against the mirror's SHA256SUMS.
_SHA256SUMS = """\
78d38af0f19c11402d8e0f445613b102f41dce3701242feb9956455055644dc1  wikipron/ban_bali_broad.tsv
cf6715e16413c9668b9663a3100796669150b639de14090f488354eee5c23613  wikipron/cop_copt_broad.tsv
98a79658a0c4a62fb583e570294f67a52871c1b2a82b8402cf6a2534742d2401  wikipron/got_goth_broad.tsv
8c417b33301127c372e281eefc2015f6b9f361d181e122b918995eedce0f905a  wikipron/got_goth_narrow.tsv
23de8ca78a16fe0a9089e254be6243b9ee617a1f0c6e37762124c6a13c078121  wikipron/lao_laoo_narrow.tsv
115aa4fe7e3a65e949fe876d24f26c8975e213e47b30ca39de5510cc1ff041b5  wikipron/syl_sylo_broad.tsv
c42dd0c953f33fb20b000867e9ae8de4d7697f9e805362ae66bfe14e43621542  wikipron/tel_telu_broad.tsv
73cec389275975f031f89061db0bf3ca60ad74a4a2063f47715364d34c550b40  wikipron/tel_telu_narrow.tsv
facfae47c324a6ff98505a9e3a74108e79a40b57d2f3241e45b6ac4cabca2a4d  wikipron/tzm_tfng_broad.tsv
c77170472b22ffbffcbb143f5b50e639613351fd32899d2ea257ca5e0344262e  wikipron/tzm_tfng_narrow.tsv
4b5e4b991046135e4c8accf364cf0b4d131200a47260ba26449fd00f45876a17  sygus_pbe_strings_2017/bikes-long.sl
1a3b8c909b0a3feba2dcb100a84487d66978a1d102a216b8b978bbe820dda167  sygus_pbe_strings_2017/dr-name-long.sl
cb128b0c7225c2025cc5815b452e4382bdded4a6cf0d5182e85942f3929bc096  sygus_pbe_strings_2017/firstname-long.sl
d2bae77affed8f463d3143982a45306fb9f400fd7afc987a6e4168b66469379d  sygus_pbe_strings_2017/initials-long.sl
135f6c06a1cdfaf8bc6af024ccfb22704d95277e164ebebc3d7e55ba9f17c446  sygus_pbe_strings_2017/lastname-long.sl
329dfcf8b767f20d87e1972d931d640a14113b57fc938ad32ac6f5fccbc2c2ca  sygus_pbe_strings_2017/name-combine-2-long.sl
2416b76f5efb10f6de5577ade000bca3b4aa85d6e5298f6e0976b99c1c922a60  sygus_pbe_strings_2017/name-combine-3-long.sl
94ef9b4072982bfc102395344b0bb849ebba3742ee17de6a63ca4ce0666acfb8  sygus_pbe_strings_2017/name-combine-4-long.sl
50fb9e33f529c7c06dc33e4f57ba34bae411b4932bb522497340d41d22e64da3  sygus_pbe_strings_2017/name-combine-long.sl
83dc74a6cff75b0be10dcbdc7ef299544991fdc28011725dfe28b9fdcbef9eb2  sygus_pbe_strings_2017/phone-1-long.sl
157b5b1e96fa9040cc12e1f4357df7e3e7b9b1c34a5290854f94688dbd434f31  sygus_pbe_strings_2017/phone-10-long.sl
6784e1e1f4c17b23716c286bf1573052cd26e38224b0fa4937e9f6be7287bf67  sygus_pbe_strings_2017/phone-2-long.sl
c24b5350babd34d3b54617dc289b46dd0379dba6529e1090f2773f60b1907e0e  sygus_pbe_strings_2017/phone-3-long.sl
b7ec60e6fe5b023bcebeb63eae70a81693d11e19302cd5c82a4ebd5c2ef322fd  sygus_pbe_strings_2017/phone-4-long.sl
bae764fdc2d155a9a38ba91328ba112ea52c2ac466801d13e490b6a5bb03eada  sygus_pbe_strings_2017/phone-5-long.sl
b8b97a6af903e7e868e3d5a8a42014ddd09792cd360ddb697147f2ffd3440962  sygus_pbe_strings_2017/phone-6-long.sl
fb4c828ab09a61cb251e58ed6553fa36f8fe7c036c3d40af152a407d81ec77fc  sygus_pbe_strings_2017/phone-7-long.sl
0c0f5aedb20ccfb1ea6529e6287771c4a8f37ffbed28acd0cbf0d249910d85b5  sygus_pbe_strings_2017/phone-8-long.sl
5e4ba9c1fe55a2d3435d1c60db2d37ae217462c78a65adc3963e20720f1ab07d  sygus_pbe_strings_2017/phone-9-long.sl
bace9c4a475c48bbbe20d60a2c673b2fcbdf361f5a04bad9a2e3ed5e436f209a  sygus_pbe_strings_2017/phone-long.sl
16d11ba1476483fa8b95a5a7d599dae11d54ca68a30b0d9decc0052c248492c5  sygus_pbe_strings_2017/reverse-name-long.sl
830b30664a225877e8d2e1f7d0f4ffa94a4ab3c96546907ec529a41b01490931  sygus_pbe_strings_2017/univ_1-long.sl
e0815f27ef80769ee63e322d01bd86dace933d59f00adff935e227f6ff869aab  sygus_pbe_strings_2017/univ_2-long.sl
9e3f50de578002636648ab9edeec7eaade9dd43cb66aa1b05470c9b78650ea24  sygus_pbe_strings_2017/univ_3-long.sl
446eff8944c001ab6adebbe1ff60063193f655d1f4a66b187a061b9fbc747d89  sygus_pbe_strings_2017/univ_4-long.sl
73b55a9c44c267f7132cecd7a0c5aee6f9c519ee13114e118c65089ee58b782e  sygus_pbe_strings_2017/univ_5-long.sl
a80407896a782f5f9e775ee433b16cdbbd1c4f2cec3e4568f884c603acabd624  sygus_pbe_strings_2017/univ_6-long.sl
"""


@dataclass(frozen=True)
class Source:
    name: str      # "<collection>/<file>", also the relative path in a mirror or output folder
    url: str
    sha256: str

    @property
    def collection(self) -> str:
        return self.name.split("/", 1)[0]


def _load() -> dict[str, Source]:
    sources = {}
    for line in _SHA256SUMS.splitlines():
        digest, name = line.split(maxsplit=1)
        collection, file = name.split("/", 1)
        sources[name] = Source(name, f"{COLLECTIONS[collection]}/{file}", digest)
    return sources


SOURCES: dict[str, Source] = _load()
