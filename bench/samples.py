"""Text samples for the token-estimate check: English prose, Chinese prose, code, JSON.

Made from what every Python ships (module docstrings, standard-library source, its build
configuration) plus a few Chinese paragraphs written here, so nothing is downloaded.
"""

from __future__ import annotations

import importlib
import json
import random
import sysconfig
from pathlib import Path
from typing import Dict, List

ENGLISH_MODULES = ("json", "http.client", "argparse", "logging", "subprocess", "textwrap",
                   "collections", "asyncio", "pathlib", "unittest", "sqlite3", "threading",
                   "email", "heapq", "functools", "pickle", "tarfile", "zipfile", "shutil",
                   "socketserver", "difflib", "inspect", "csv", "decimal", "fractions", "sys", "os",
                   "random", "re", "typing", "dataclasses", "enum", "contextlib", "calendar",
                   "codecs", "io", "string", "statistics", "queue", "weakref", "locale")

CHINESE = [
    "今天上午我们对服务进行了例行检查，发现数据库连接池在高峰时段经常被耗尽。经过分析，原因是部分请求在处理完成后没有及时释放连接，导致新的请求只能排队等待。我们已经修复了这个问题，并增加了监控告警。",
    "这个函数的作用是读取配置文件并返回一个字典。如果文件不存在，它会使用默认值；如果文件格式错误，它会记录一条警告并继续运行，而不是直接抛出异常，这样可以保证程序在配置有问题时仍然能够启动。",
    "请帮我把这段代码重构一下，目标是让它更容易测试。现在所有的逻辑都写在一个很长的函数里，既读取文件，又发送网络请求，还要更新数据库，出了问题很难定位到底是哪一步失败了。",
    "春天来了，公园里的花都开了。孩子们在草地上放风筝，老人们坐在长椅上聊天，湖面上有几只小船慢慢地划过。阳光照在身上暖洋洋的，让人觉得整个城市都变得轻松起来。",
    "根据测试结果，新版本的响应时间比旧版本缩短了百分之三十，内存占用也下降了不少。不过在并发量很大的情况下，仍然偶尔会出现超时，我们需要进一步排查网络层和线程调度方面的问题。",
    "会议纪要：一、确认下个月的发布计划；二、前端团队负责完成新的设置页面；三、后端团队需要在周五之前提供接口文档；四、测试团队准备回归测试用例，并在预发布环境中验证所有功能。",
    "错误信息显示无法连接到远程服务器，请检查网络设置是否正确，防火墙是否阻止了相应的端口，以及服务器是否已经启动。如果问题仍然存在，请联系系统管理员并提供完整的日志文件。",
    "机器学习模型在训练集上的准确率很高，但在验证集上的表现明显下降，这说明模型可能出现了过拟合。我们可以尝试增加正则化、减少模型的参数数量，或者收集更多的训练数据来改善这种情况。",
    "用户反馈说在手机上打开网页时加载很慢，尤其是图片较多的页面。我们计划对图片进行压缩，并使用懒加载技术，只有当图片出现在屏幕可见区域时才去请求，这样可以明显减少首屏加载的时间。",
    "这本书讲述了一个普通人在大城市里奋斗的故事。他从一名送货员做起，白天工作，晚上自学编程，经过几年的努力，终于成为一家科技公司的工程师。故事虽然简单，却让很多读者深受感动。",
    "为了保证数据安全，所有的备份文件都需要加密存储，并且定期在另一台机器上进行恢复演练。只有经过验证可以成功恢复的备份，才能被认为是有效的备份，否则在真正出事的时候可能毫无用处。",
    "上下文压缩的目标是在不丢失重要信息的前提下，把对话的长度控制在模型的窗口之内。被移出上下文的内容会被完整地存档，模型在需要的时候可以通过工具把它们重新读取回来。",
    "在部署新版本之前，请先确认所有的单元测试和集成测试都已经通过，并且数据库迁移脚本已经在测试环境中执行过。上线之后要密切关注错误率和延迟指标，一旦发现异常立即回滚。",
    "这家餐厅的招牌菜是红烧肉和清蒸鱼，味道非常地道，价格也很实惠。周末的时候经常需要排队，建议大家提前打电话预约，或者选择在工作日的中午过来，人会少很多。",
    "日志中出现了大量重复的警告，内容是缓存命中率过低。初步判断是缓存的过期时间设置得太短，导致数据频繁失效。我们准备把过期时间从一分钟调整为十分钟，再观察一段时间的效果。",
    "学习一门新的编程语言，最好的办法就是动手写一个小项目。比如可以先写一个命令行工具，用来整理电脑里的文件，然后再逐步加入配置文件、日志和测试，在实践中掌握语言的各种特性。",
]

CODE_FILES = ("json/encoder.py", "http/client.py", "argparse.py", "textwrap.py",
              "shutil.py", "difflib.py", "heapq.py", "functools.py", "tarfile.py", "csv.py")


def english() -> List[str]:
    out = []
    for name in ENGLISH_MODULES:
        try:
            doc = importlib.import_module(name).__doc__ or ""
        except Exception:
            continue
        doc = " ".join(line for line in doc.splitlines()
                       if not line.strip().startswith((">>>", "...")))
        doc = " ".join(doc.split())
        if len(doc) >= 300:
            out.append(doc[:2000])
    return out[:20]


def chinese() -> List[str]:
    return list(CHINESE)


def code() -> List[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for rel in CODE_FILES:
        p = stdlib / rel
        try:
            text = p.read_text(encoding="utf-8")
        except OSError:
            continue
        mid = len(text) // 3
        out.append(text[mid:mid + 1500])
        out.append(text[2 * mid:2 * mid + 1500])
    return out[:20]


def json_samples() -> List[str]:
    rng = random.Random(3)
    out = []
    cfg = {k: v for k, v in sorted(sysconfig.get_config_vars().items()) if isinstance(v, (str, int))}
    items = list(cfg.items())
    for i in range(5):
        chunk = dict(items[i * 40:(i + 1) * 40])
        out.append(json.dumps(chunk, indent=2 if i % 2 else None, ensure_ascii=False)[:2500])
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(stdlib.glob("*.py"))[:200]
    for i in range(5):
        listing = []
        for p in files[i * 20:(i + 1) * 20]:
            st = p.stat()
            listing.append({"name": p.name, "path": str(p), "size": st.st_size,
                            "mode": oct(st.st_mode), "is_dir": False})
        out.append(json.dumps({"entries": listing, "total": len(listing)},
                              indent=None if i % 2 else 2)[:2500])
    words = "build test deploy fix error cache token session retry timeout parser".split()
    for i in range(10):
        records = [{"id": rng.randint(10_000, 99_999), "title": " ".join(rng.choice(words) for _ in range(4)),
                    "state": rng.choice(["open", "closed"]), "labels": rng.sample(words, 2),
                    "created_at": "2026-%02d-%02dT%02d:%02d:00Z" % (rng.randint(1, 12), rng.randint(1, 28),
                                                                    rng.randint(0, 23), rng.randint(0, 59)),
                    "score": round(rng.random() * 100, 2), "ok": rng.random() < 0.5}
                   for _ in range(12)]
        out.append(json.dumps({"items": records}, indent=2 if i % 2 else None)[:2500])
    return out


def all_samples() -> Dict[str, List[str]]:
    return {"English": english(), "Chinese": chinese(), "code": code(), "JSON": json_samples()}


if __name__ == "__main__":
    for k, v in all_samples().items():
        print(k, len(v), sum(map(len, v)))
